package stack

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve runs newServer with small limits on a loopback port; the handler
// reads the whole body and reports whether it could.
func serve(t *testing.T) (addr string, bodyErrs chan error) {
	t.Helper()
	bodyErrs = make(chan error, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		bodyErrs <- err
		fmt.Fprintln(w, "ok")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(h, Timeouts{ReadHeader: 200 * time.Millisecond, Read: 500 * time.Millisecond, MaxHeaderBytes: 1 << 10}, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), bodyErrs
}

// closedWithin reports whether the server closes conn (reading it ends)
// before the deadline; a generous deadline, so only "never" fails.
func closedWithin(conn net.Conn, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

func TestSlowClientsAreCutOff(t *testing.T) {
	addr, bodyErrs := serve(t)

	// Headers that never end.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: x\r\n")
	if !closedWithin(conn, 10*time.Second) {
		t.Fatal("a client that never finishes its headers keeps the connection")
	}

	// A body that never arrives in full.
	conn2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	fmt.Fprint(conn2, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly part")
	select {
	case err := <-bodyErrs:
		if err == nil {
			t.Fatal("the handler read a body that never arrived in full")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a slow body is never cut off")
	}

	// Oversized headers: 431, nothing handled.
	conn3, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn3.Close()
	fmt.Fprintf(conn3, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 8<<10))
	resp, err := http.ReadResponse(bufio.NewReader(conn3), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversized headers: %d", resp.StatusCode)
	}
	select {
	case <-bodyErrs:
		t.Fatal("the handler ran for a request with oversized headers")
	default:
	}
}

// Headers over the limit are a 431 that echoes the request identity, as
// every broker answer does; the handler behind does not run.
func TestOversizedHeadersEchoRequestIdentity(t *testing.T) {
	addr, bodyErrs := serve(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\nX-Broker-API-Request-Identity: req-431\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 2<<10))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get("X-Broker-API-Request-Identity") != "req-431" {
		t.Fatalf("oversized headers: %d, identity %q: %s", resp.StatusCode, resp.Header.Get("X-Broker-API-Request-Identity"), body)
	}
	if !strings.Contains(string(body), `"error":"RequestHeaderFieldsTooLarge"`) {
		t.Errorf("not an OSB error body: %s", body)
	}
	select {
	case <-bodyErrs:
		t.Fatal("the handler ran for a request with oversized headers")
	default:
	}
}

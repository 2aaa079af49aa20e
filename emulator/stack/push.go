package stack

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// The push endpoint stands in for what Google Cloud puts in front of the
// reconcile function: only the subscription's identity may invoke it.
// Locally it listens on a loopback port of its own (never the broker's,
// which takes requests from anyone who reaches it), behind a token the
// stack generates as the first segment of every push URL, and it lets
// through only what the Pub/Sub emulator sends: a POST of a push body
// (a JSON object with a message) to /projects/P/topics/T. Anything else
// is refused with a JSON log line that names the reason and the size,
// never the body: the functions framework prints a body it cannot parse
// raw on stderr, and a newline in it would be a log line of the
// sender's choosing.

// maxPushBytes is Pub/Sub's largest message (10 MB) with its envelope.
const maxPushBytes = 14 << 20

// pushPath is a topic's path as the framework reads the topic from it.
var pushPath = regexp.MustCompile(`^/projects/[A-Za-z0-9._~-]+/topics/[A-Za-z0-9._~%+-]+$`)

// servePush starts the push endpoint and sets s.PushURL.
func (s *Stack) servePush(opts Options, inner *url.URL, log *slog.Logger) error {
	addr := opts.PushAddr
	if addr == "" {
		addr = os.Getenv("SPECSYNC_LOCAL_PUSH_ADDR")
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("the push endpoint's address %q is not a loopback address (127.0.0.1:PORT)", addr)
	}
	token := opts.PushToken
	if token == "" {
		token = os.Getenv("SPECSYNC_LOCAL_PUSH_TOKEN")
	}
	if token == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		token = hex.EncodeToString(b)
	}
	if !tokenChars.MatchString(token) {
		return fmt.Errorf("SPECSYNC_LOCAL_PUSH_TOKEN must be 16 to 128 letters, digits, - or _")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (the push endpoint): %w", addr, err)
	}
	proxy := httputil.NewSingleHostReverseProxy(inner)
	proxy.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	s.PushURL = "http://" + ln.Addr().String() + "/" + token
	s.pushServer = newServer(pushGate(token, proxy, log), opts.Timeouts, log)
	go func() { s.errc <- s.pushServer.Serve(ln) }()
	return nil
}

var tokenChars = regexp.MustCompile(`^[A-Za-z0-9_-]{16,128}$`)

// pushGate lets through to next only a push body POSTed below the token.
func pushGate(token string, next http.Handler, log *slog.Logger) http.Handler {
	refuse := func(w http.ResponseWriter, status int, reason string, size int) {
		log.Warn("the push endpoint refused a request", "status", status, "reason", reason, "bytes", size)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, "{\"error\":%q}\n", reason)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if subtle.ConstantTimeCompare([]byte(first), []byte(token)) != 1 {
			refuse(w, http.StatusNotFound, "no push endpoint here (the token is wrong or missing)", 0)
			return
		}
		path := "/" + rest
		switch {
		case r.Method != http.MethodPost:
			refuse(w, http.StatusMethodNotAllowed, "a push is a POST", 0)
			return
		case !pushPath.MatchString(path):
			refuse(w, http.StatusNotFound, "a push goes to /projects/P/topics/T", 0)
			return
		case r.Header.Get("Ce-Id") != "" || strings.Contains(r.Header.Get("Content-Type"), "cloudevents"):
			refuse(w, http.StatusBadRequest, "the Pub/Sub emulator pushes no CloudEvent", 0)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxPushBytes+1))
		switch {
		case err != nil:
			refuse(w, http.StatusBadRequest, "the body could not be read", len(body))
			return
		case len(body) > maxPushBytes:
			refuse(w, http.StatusRequestEntityTooLarge, "the body is larger than a Pub/Sub push", len(body))
			return
		}
		var push struct {
			Message      *json.RawMessage `json:"message"`
			Subscription string           `json:"subscription"`
		}
		if err := json.Unmarshal(body, &push); err != nil || push.Message == nil || !bytes.HasPrefix(bytes.TrimSpace(*push.Message), []byte("{")) {
			refuse(w, http.StatusBadRequest, "the body is not a Pub/Sub push (a JSON object with a message object)", len(body))
			return
		}
		r.URL.Path, r.URL.RawPath = path, ""
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// relayStderr hands os.Stderr to a pipe whose lines become JSON lines of
// log (each the "text" of one, at most 4 KiB of it), until the stack
// closes: what the functions framework prints raw (a body it cannot
// parse, a returned error, a panic's stack) can then put no line of its
// own into the log. Our loggers write to the stderr the process started
// with (functions.LogOutput), never through the relay.
func (s *Stack) relayStderr(log *slog.Logger) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	orig := os.Stderr
	os.Stderr = w
	done := make(chan struct{})
	go func() {
		defer close(done)
		relayLines(r, func(line string, cut int) {
			attrs := []any{"text", line}
			if cut > 0 {
				attrs = append(attrs, "cut_bytes", cut)
			}
			log.Warn("the functions framework printed", attrs...)
		})
	}()
	s.stops = append(s.stops, func() {
		os.Stderr = orig
		w.Close()
		<-done
		r.Close()
	})
	return nil
}

// maxRelayLine bounds a relayed line; the rest of it is counted, not kept.
const maxRelayLine = 4 << 10

// relayLines calls emit for every line of r (at most maxRelayLine bytes of
// it, and how many bytes were cut), reading however long a line is.
func relayLines(r io.Reader, emit func(line string, cut int)) {
	br := bufio.NewReaderSize(r, maxRelayLine)
	var line []byte
	cut := 0
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(line) < maxRelayLine {
			n := min(len(chunk), maxRelayLine-len(line))
			line = append(line, chunk[:n]...)
			cut += len(chunk) - n
		} else {
			cut += len(chunk)
		}
		if err != nil {
			if len(line) > 0 || cut > 0 {
				emit(string(line), cut)
			}
			return
		}
		if !isPrefix {
			emit(string(line), cut)
			line, cut = line[:0], 0
		}
	}
}

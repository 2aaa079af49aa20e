package osb_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/logging"
	"github.com/specsync/specsync/pkg/spec"
)

// getCatalogAs sends GET (or HEAD) /v2/catalog with the given
// Accept-Encoding (none when "-") and If-None-Match (none when ""), on a
// client that neither asks for gzip by itself nor decodes it (Go's
// default transport does both), so the test sees the bytes on the wire.
func (e *env) getCatalogAs(method, acceptEncoding, ifNoneMatch string) response {
	e.t.Helper()
	req := e.request(method, "/v2/catalog", "")
	if acceptEncoding != "-" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func gunzip(t testing.TB, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzip body does not decode: %v", err)
	}
	return out
}

// wantVary checks the answer says Vary: Accept-Encoding (a shared cache
// must keep the two forms apart, 304s included).
func wantVary(t testing.TB, what string, r response) {
	t.Helper()
	for _, v := range r.header.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "Accept-Encoding") {
				return
			}
		}
	}
	t.Errorf("%s: %d without Vary: Accept-Encoding (Vary %q)", what, r.status, r.header.Values("Vary"))
}

// TestCatalogGzip: a client that accepts gzip gets the catalog
// gzip-compressed, which decodes to exactly the identity body, with a
// tag of its own and its length; each form answers 304 to its own tag
// only; every answer varies on Accept-Encoding; both forms are served
// from memory (0 Firestore reads) on a warm instance.
func TestCatalogGzip(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.seed(parseSpec(t, specYAML("db")), parseSpec(t, specYAML("cache")), parseSpec(t, specYAML("queue")))

	plain := e.getCatalogAs(http.MethodGet, "-", "")
	gz := e.getCatalogAs(http.MethodGet, "gzip", "")
	for what, r := range map[string]response{"identity": plain, "gzip": gz} {
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
		wantVary(t, what, r)
		if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) {
			t.Errorf("%s: Content-Length %q for %d bytes", what, cl, len(r.body))
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", what, ct)
		}
	}
	if ce := plain.header.Get("Content-Encoding"); ce != "" {
		t.Fatalf("identity: Content-Encoding %q", ce)
	}
	if ce := gz.header.Get("Content-Encoding"); ce != "gzip" {
		t.Fatalf("gzip: Content-Encoding %q, want gzip", ce)
	}
	if n := serviceCount(t, plain.body); n != 3 {
		t.Fatalf("identity: %d services, want 3", n)
	}
	if got := gunzip(t, gz.body); !bytes.Equal(got, plain.body) {
		t.Fatalf("gzip form decodes to\n%s\nthe identity form is\n%s", got, plain.body)
	}
	if len(gz.body) >= len(plain.body) {
		t.Errorf("gzip form %d bytes, identity %d: not smaller", len(gz.body), len(plain.body))
	}
	tagPlain, tagGz := plain.header.Get("ETag"), gz.header.Get("ETag")
	if tagPlain == "" || tagGz == "" || tagPlain == tagGz {
		t.Fatalf("ETags identity %s, gzip %s: want two different tags", tagPlain, tagGz)
	}
	if want := strings.TrimSuffix(tagPlain, `"`) + `-gz"`; tagGz != want {
		t.Errorf("gzip ETag %s, want %s (the identity tag with -gz)", tagGz, want)
	}
	if readsOf(t, gz) != 0 {
		t.Errorf("warm gzip request: %d reads, want 0", readsOf(t, gz))
	}

	// 304 per representation: a form's own tag (weak or strong, or in a
	// list) is 304 with that tag; the other form's tag is the 200 of the
	// form asked for.
	for _, c := range []struct {
		accept, inm string
		status      int
		tag         string
	}{
		{"gzip", tagGz, http.StatusNotModified, tagGz},
		{"gzip", "W/" + tagGz, http.StatusNotModified, tagGz},
		{"gzip", `"c0-0", ` + tagGz, http.StatusNotModified, tagGz},
		{"gzip", tagPlain, http.StatusOK, tagGz},
		{"-", tagPlain, http.StatusNotModified, tagPlain},
		{"-", tagGz, http.StatusOK, tagPlain},
		{"gzip;q=0", tagGz, http.StatusOK, tagPlain},
		{"gzip;q=0", tagPlain, http.StatusNotModified, tagPlain},
	} {
		what := fmt.Sprintf("Accept-Encoding %s, If-None-Match %s", c.accept, c.inm)
		r := e.getCatalogAs(http.MethodGet, c.accept, c.inm)
		if r.status != c.status || r.header.Get("ETag") != c.tag {
			t.Fatalf("%s: %d with ETag %s, want %d with %s", what, r.status, r.header.Get("ETag"), c.status, c.tag)
		}
		wantVary(t, what, r)
		if c.status == http.StatusNotModified && len(r.body) != 0 {
			t.Errorf("%s: 304 with a body", what)
		}
		if c.status == http.StatusOK && r.header.Get("ETag") == tagGz && !bytes.Equal(gunzip(t, r.body), plain.body) {
			t.Errorf("%s: gzip body is not the catalog", what)
		}
	}

	// HEAD says what GET would send, form for form.
	for _, accept := range []string{"-", "gzip"} {
		get, head := e.getCatalogAs(http.MethodGet, accept, ""), e.getCatalogAs(http.MethodHead, accept, "")
		for _, h := range []string{"ETag", "Content-Length", "Content-Encoding", "Vary"} {
			if head.header.Get(h) != get.header.Get(h) {
				t.Errorf("Accept-Encoding %s: HEAD %s %q, GET %q", accept, h, head.header.Get(h), get.header.Get(h))
			}
		}
		if head.status != http.StatusOK || len(head.body) != 0 {
			t.Errorf("HEAD: %d with %d body bytes", head.status, len(head.body))
		}
	}

	// A new revision makes a new gzip form too.
	e.seed(parseSpec(t, specYAML("search")))
	e.clock.Advance(e.window)
	r := e.getCatalogAs(http.MethodGet, "gzip", tagGz)
	if r.status != http.StatusOK || r.header.Get("ETag") == tagGz || serviceCount(t, gunzip(t, r.body)) != 4 {
		t.Fatalf("after a change: %d, ETag %s (was %s)", r.status, r.header.Get("ETag"), tagGz)
	}
}

// TestCatalogAcceptEncoding: which form each Accept-Encoding gets,
// q-values read as RFC 9110 says: q=0 refuses, the higher weight wins, a
// tie goes to gzip, * stands for what is not named, a weight that does
// not parse refuses its coding.
func TestCatalogAcceptEncoding(t *testing.T) {
	e := newEnv(t, time.Minute)
	e.seed(parseSpec(t, specYAML("db")))
	for accept, wantGzip := range map[string]bool{
		"-":                             false,
		"":                              false,
		"gzip":                          true,
		"GZIP":                          true,
		"x-gzip":                        true,
		"gzip, deflate, br":             true,
		"br;q=1.0, gzip;q=0.8, *;q=0.1": true, // identity unnamed: *'s 0.1
		"deflate":                       false,
		"br":                            false,
		"*":                             true,
		"gzip;q=0":                      false,
		"gzip; q=0.000":                 false,
		"GZIP;Q=0":                      false,
		"gzip;q=0, *":                   false,
		"*, gzip;q=0":                   false,
		"gzip;q=0.5, identity":          false,
		"identity;q=0.5, gzip":          true,
		"gzip;q=0.5, identity;q=0.5":    true,
		"identity;q=0, gzip;q=0.1":      true,
		"gzip;q=abc":                    false,
		"gzip;q=1.5":                    false,
		"gzip;q=0.0001":                 false,
		"gzip;q=1.000":                  true,
		"gzip;level=1":                  true,
	} {
		r := e.getCatalogAs(http.MethodGet, accept, "")
		if r.status != http.StatusOK {
			t.Fatalf("Accept-Encoding %q: %d %s", accept, r.status, r.body)
		}
		if got := r.header.Get("Content-Encoding") == "gzip"; got != wantGzip {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", accept, got, wantGzip)
		}
		wantVary(t, accept, r)
	}
}

// renderLog is a JSON log (pkg/logging's, as the functions write it)
// that tests can read while the broker writes it.
type renderLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *renderLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *renderLog) lines(t testing.TB, message string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(l.buf.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if m["message"] == message {
			out = append(out, m)
		}
	}
	return out
}

// TestCatalogTooLargeIsRefused: a catalog over the configured limit is
// refused at render time, never cut. Identity over it and gzip under:
// gzip to whoever accepts it, a 500 CatalogTooLarge OSB error to the
// others. Both over: the 500 to everyone. Each render says so once in
// an ERROR log line with stable fields, and the status page shows it.
func TestCatalogTooLargeIsRefused(t *testing.T) {
	e := newEnv(t, time.Minute)
	specs := make([]*spec.Spec, 20)
	for i := range specs {
		specs[i] = parseSpec(t, specYAML(fmt.Sprintf("svc-%02d", i)))
	}
	e.seed(specs...)
	plain := e.getCatalogAs(http.MethodGet, "-", "")
	gz := e.getCatalogAs(http.MethodGet, "gzip", "")
	if plain.status != http.StatusOK || gz.status != http.StatusOK {
		t.Fatalf("under the default limit: %d, %d", plain.status, gz.status)
	}
	size, gzSize := len(plain.body), len(gz.body)

	// A fresh instance (the handler reads Broker.Cache per request) with
	// the limit between the two forms' sizes, logging as the functions do.
	logs := &renderLog{}
	fresh := func(limit int) {
		e.broker.Cache = e.newCache(e.window)
		e.broker.Cache.MaxBytes = int64(limit)
		e.broker.Cache.Logger = logging.New(logs, "info")
	}
	fresh(size - 1)
	r := e.getCatalogAs(http.MethodGet, "gzip", "")
	if r.status != http.StatusOK || !bytes.Equal(gunzip(t, r.body), plain.body) {
		t.Fatalf("identity over the limit, gzip accepted: %d %s", r.status, r.body)
	}
	// Identity preferred but gzip acceptable: gzip, the only form that fits.
	if r := e.getCatalogAs(http.MethodGet, "gzip;q=0.1, identity", ""); r.status != http.StatusOK || r.header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("identity over the limit, gzip acceptable at a lower weight: %d, Content-Encoding %q", r.status, r.header.Get("Content-Encoding"))
	}
	// Refused with or without the tag of a body it once served (never a
	// 304 for a form it does not serve).
	for _, c := range []struct{ accept, inm string }{{"-", ""}, {"gzip;q=0", plain.header.Get("ETag")}, {"identity", ""}} {
		accept := c.accept
		r := e.getCatalogAs(http.MethodGet, accept, c.inm)
		eb := wantOSBError(t, r, http.StatusInternalServerError, "CatalogTooLarge")
		wantVary(t, "refused "+accept, r)
		for _, want := range []string{strconv.Itoa(size), strconv.Itoa(size - 1), strconv.Itoa(gzSize), "Accept-Encoding: gzip"} {
			if !strings.Contains(eb.Description, want) {
				t.Errorf("refusal %q does not say %q", eb.Description, want)
			}
		}
	}
	wantTooLargeLog(t, logs, size, gzSize, size-1, "identity")
	wantStatusSays(t, e, "gzip-compressed only")

	// Both forms over the limit: nothing is served, to anyone.
	fresh(gzSize - 1)
	for _, accept := range []string{"-", "gzip"} {
		r := e.getCatalogAs(http.MethodGet, accept, "")
		eb := wantOSBError(t, r, http.StatusInternalServerError, "CatalogTooLarge")
		if bytes.Contains(r.body, []byte(`"services"`)) || !strings.Contains(eb.Description, "never cut") {
			t.Fatalf("both over, Accept-Encoding %s: %s", accept, r.body)
		}
		wantVary(t, "refused "+accept, r)
	}
	wantTooLargeLog(t, logs, size, gzSize, gzSize-1, "identity and gzip")
	wantStatusSays(t, e, "both over the limit")

	// The limit back over both: served again, nothing refused on the page.
	fresh(size)
	if r := e.getCatalogAs(http.MethodGet, "-", ""); r.status != http.StatusOK || !bytes.Equal(r.body, plain.body) {
		t.Fatalf("at the limit exactly: %d", r.status)
	}
	if page := e.statusPage(); strings.Contains(page, "catalog-too-large") {
		t.Fatal("status page says the catalog is too large when it fits")
	}
}

// wantTooLargeLog checks the last render's ERROR line: one per render,
// with the stable fields an alert counts on.
func wantTooLargeLog(t *testing.T, logs *renderLog, size, gzSize, limit int, refused string) {
	t.Helper()
	var found map[string]any
	for _, l := range logs.lines(t, "catalog too large to serve") {
		if l["limit"] == float64(limit) {
			if found != nil {
				t.Fatalf("two log lines for one render at limit %d", limit)
			}
			found = l
		}
	}
	if found == nil {
		t.Fatalf("no 'catalog too large to serve' line for limit %d", limit)
	}
	// The contract the log-based metrics read (logging.Events).
	for f, kind := range logging.Events[logging.EventCatalogTooLarge] {
		v, ok := found[f]
		switch {
		case !ok:
			t.Errorf("catalog_too_large line without %s: %v", f, found)
		case kind == logging.Number && fmt.Sprintf("%T", v) != "float64", kind == logging.String && fmt.Sprintf("%T", v) != "string":
			t.Errorf("catalog_too_large line: %s is %T, want a %s", f, v, kind)
		}
	}
	if found["severity"] != "ERROR" || found["event"] != "catalog_too_large" || found["bytes"] != float64(size) ||
		found["gzip_bytes"] != float64(gzSize) || found["refused"] != refused || found["services"] != float64(20) {
		t.Fatalf("log line %v: want severity ERROR, event catalog_too_large, bytes %d, gzip_bytes %d, refused %q, services 20", found, size, gzSize, refused)
	}
}

func (e *env) statusPage() string {
	e.t.Helper()
	req := e.request(http.MethodGet, "/status", "")
	req.SetBasicAuth("", "")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	r := e.send(req)
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /status: %d %s", r.status, r.body)
	}
	return string(r.body)
}

func wantStatusSays(t *testing.T, e *env, what string) {
	t.Helper()
	page := e.statusPage()
	i := strings.Index(page, `id="catalog-too-large"`)
	if i < 0 || !strings.Contains(page[i:], what) {
		t.Fatalf("status page does not show the refused catalog (%q)", what)
	}
}

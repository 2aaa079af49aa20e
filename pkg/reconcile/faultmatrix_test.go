package reconcile_test

// The registry fault matrix (docs/RELIABILITY.md): every way a registry
// breaks, against the real in-process OCI registry and an HTTP index, on
// the first run (nothing stored yet) and on a later run (a good catalog
// stored). Each case ends with the invariant checker.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	"github.com/sirupsen/logrus"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// netFault breaks the connection before HTTP: where the transport dials.
type netFault int

const (
	netOK netFault = iota
	netRefused
	netDNS
	netTLS
)

// httpFault answers a request instead of the registry when it applies.
type httpFault func(w http.ResponseWriter, r *http.Request) bool

// faultNet serves a registry handler over TLS as "example.com" (the name
// httptest's certificate is for) and dials it through a transport whose
// target can be switched to a closed port, an unresolvable name or a
// server with an untrusted certificate; an http fault, when set, answers
// requests in front of the registry.
type faultNet struct {
	mu        sync.Mutex
	net       netFault
	fault     httpFault
	good      *httptest.Server
	untrusted *httptest.Server
	refused   string
	transport *http.Transport
}

func newFaultNet(t *testing.T, h http.Handler) *faultNet {
	t.Helper()
	f := &faultNet{}
	f.good = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		fault := f.fault
		f.mu.Unlock()
		if fault != nil && fault(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	f.good.Config.ErrorLog = nopLogger()
	f.good.StartTLS()
	t.Cleanup(f.good.Close)
	f.untrusted = httptest.NewUnstartedServer(h)
	f.untrusted.Config.ErrorLog = nopLogger() // the failed handshakes are the point
	f.untrusted.TLS = &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	f.untrusted.StartTLS()
	t.Cleanup(f.untrusted.Close)
	f.refused = emulatortest.RefusingAddr(t)

	pool := x509.NewCertPool()
	pool.AddCert(f.good.Certificate())
	var d net.Dialer
	f.transport = &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			f.mu.Lock()
			mode := f.net
			f.mu.Unlock()
			switch mode {
			case netRefused:
				return d.DialContext(ctx, network, f.refused)
			case netDNS:
				return d.DialContext(ctx, network, "specsync-fault.invalid:443")
			case netTLS:
				return d.DialContext(ctx, network, f.untrusted.Listener.Addr().String())
			}
			return d.DialContext(ctx, network, f.good.Listener.Addr().String())
		},
	}
	t.Cleanup(f.transport.CloseIdleConnections)
	return f
}

func (f *faultNet) set(n netFault, h httpFault) {
	f.mu.Lock()
	f.net, f.fault = n, h
	f.mu.Unlock()
	f.transport.CloseIdleConnections()
}

// selfSigned is a certificate for example.com no client trusts.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "example.com"},
		DNSNames: []string{"example.com"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// The HTTP faults. match limits one to some requests (nil: all).
type match func(r *http.Request) bool

// when makes f a fault for the requests m matches (nil: all); the others
// pass through untouched.
func when(m match, f func(w http.ResponseWriter, r *http.Request)) httpFault {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if m != nil && !m(r) {
			return false
		}
		f(w, r)
		return true
	}
}

func catalogReq(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/_catalog") }

func status(code int, retryAfter string, m match) httpFault {
	return when(m, func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		if code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="specsync-test"`)
		}
		http.Error(w, http.StatusText(code), code)
	})
}

// slowHeaders holds the response past the client's timeout.
func slowHeaders(m match) httpFault {
	return when(m, func(w http.ResponseWriter, r *http.Request) {
		stall(r)
	})
}

// stall holds a request until the client gives up (or 30 s pass).
func stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(30 * time.Second):
	}
}

// slowBody sends the headers and half a body, then stalls.
func slowBody(m match) httpFault {
	return when(m, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "4096")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"repositories": ["specs/`))
		w.(http.Flusher).Flush()
		stall(r)
	})
}

// truncated promises more body than it sends, then closes.
func truncated(m match) httpFault {
	return when(m, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "4096")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"repositories": ["specs/postgres", "spe`))
	})
}

func garbage(m match) httpFault {
	return when(m, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("<html><body>\x00\xff not what you asked for {{{ ]]]</body></html>"))
	})
}

// wholeFault is a fault that makes the whole listing unobtainable.
type wholeFault struct {
	name string
	net  netFault
	http httpFault
	// want are substrings the recorded error must hold (any of them).
	want []string
}

func ociWholeFaults() []wholeFault {
	return []wholeFault{
		{name: "connection refused", net: netRefused, want: []string{"connection refused"}},
		{name: "DNS failure", net: netDNS, want: []string{"no such host"}},
		{name: "TLS failure", net: netTLS, want: []string{"x509", "certificate"}},
		{name: "401", http: status(401, "", nil), want: []string{"401", "UNAUTHORIZED", "Unauthorized"}},
		{name: "403", http: status(403, "", nil), want: []string{"403"}},
		{name: "429 with Retry-After", http: status(429, "3600", nil), want: []string{"429"}},
		{name: "500", http: status(500, "", nil), want: []string{"500"}},
		{name: "502", http: status(502, "", nil), want: []string{"502"}},
		{name: "503", http: status(503, "", nil), want: []string{"503"}},
		{name: "catalog 500", http: status(500, "", catalogReq), want: []string{"catalog page 1", "500"}},
		{name: "slow headers", http: slowHeaders(catalogReq), want: []string{"did not finish within"}},
		{name: "slow body", http: slowBody(catalogReq), want: []string{"did not finish within"}},
		{name: "truncated body", http: truncated(catalogReq), want: []string{"unexpected EOF"}},
		{name: "garbage body", http: garbage(catalogReq), want: []string{"invalid character"}},
		{name: "every manifest 500", http: status(500, "", func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/manifests/") }),
			want: []string{"all 3 repositories failed", "500"}},
	}
}

func httpWholeFaults() []wholeFault {
	return []wholeFault{
		{name: "connection refused", net: netRefused, want: []string{"connection refused"}},
		{name: "DNS failure", net: netDNS, want: []string{"no such host"}},
		{name: "TLS failure", net: netTLS, want: []string{"x509", "certificate"}},
		{name: "401", http: status(401, "", nil), want: []string{"401"}},
		{name: "403", http: status(403, "", nil), want: []string{"403"}},
		{name: "429 with Retry-After", http: status(429, "3600", nil), want: []string{"429"}},
		{name: "500", http: status(500, "", nil), want: []string{"500"}},
		{name: "502", http: status(502, "", nil), want: []string{"502"}},
		{name: "503", http: status(503, "", nil), want: []string{"503"}},
		{name: "slow headers", http: slowHeaders(nil), want: []string{"did not finish within"}},
		{name: "slow body", http: slowBody(nil), want: []string{"did not finish within"}},
		{name: "truncated body", http: truncated(nil), want: []string{"Content-Length", "unexpected EOF"}},
		{name: "garbage body", http: garbage(nil), want: []string{"neither YAML nor JSON"}},
		{name: "oversized body", http: func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write([]byte("specs:\n" + strings.Repeat("# padding padding padding padding\n", 4096)))
			return true
		}, want: []string{"more than the"}},
	}
}

const faultTimeout = 3 * time.Second

var matrixSpecs = []string{"postgres", "redis", "rabbitmq"}

// ociFaultRig is the OCI registry of the matrix: pushed to over plain
// HTTP, fetched over the fault network.
type ociFaultRig struct {
	fn    *faultNet
	plain string // host[:port] to push to
	reg   reconcile.Registry
}

func newOCIFaultRig(t *testing.T, name string) *ociFaultRig {
	t.Helper()
	h := ggcr.New(ggcr.Logger(nopLogger()))
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	fn := newFaultNet(t, h)
	rig := &ociFaultRig{fn: fn, plain: strings.TrimPrefix(plain.URL, "http://"),
		reg: reconcile.Registry{Name: name, Policy: defaultPolicy}}
	rig.coldStart(t)
	return rig
}

// coldStart replaces the source by a new one, as a new function instance
// has: its manifest cache is empty, so every manifest is read again.
func (o *ociFaultRig) coldStart(t *testing.T) {
	t.Helper()
	src, err := registry.NewOCI(registry.OCIConfig{Host: "example.com", Transport: o.fn.transport, Timeout: faultTimeout, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	o.reg.Source = src
}

func (o *ociFaultRig) pushLabel(t *testing.T, repo, label string) {
	t.Helper()
	if _, err := emulator.PushSpecImage(context.Background(), o.plain, repo, "latest", label, nil); err != nil {
		t.Fatalf("push %s: %v", repo, err)
	}
}

func (o *ociFaultRig) pushSpec(t *testing.T, repo, yamlText string) {
	t.Helper()
	o.pushLabel(t, repo, base64.StdEncoding.EncodeToString([]byte(yamlText)))
}

// httpFaultRig is an HTTP index of the matrix.
type httpFaultRig struct {
	fn  *faultNet
	mu  sync.Mutex
	doc string
	reg reconcile.Registry
}

func newHTTPFaultRig(t *testing.T, name string) *httpFaultRig {
	t.Helper()
	r := &httpFaultRig{}
	r.fn = newFaultNet(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		doc := r.doc
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write([]byte(doc))
	}))
	src, err := registry.NewHTTP(registry.HTTPConfig{URL: "https://example.com/index.yaml", Client: &http.Client{Transport: r.fn.transport},
		Timeout: faultTimeout, MaxBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	r.reg = reconcile.Registry{Name: name, Source: src, Policy: defaultPolicy}
	return r
}

func (r *httpFaultRig) setDoc(names ...string) {
	var b strings.Builder
	b.WriteString("specs:\n")
	for _, n := range names {
		b.WriteString("  - ")
		b.WriteString(strings.ReplaceAll(strings.TrimSpace(specYAML(n)), "\n", "\n    "))
		b.WriteString("\n")
	}
	r.mu.Lock()
	r.doc = b.String()
	r.mu.Unlock()
}

func errorHasAny(msg string, want []string) bool {
	for _, w := range want {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// runWholeFault is one row of the matrix: a fault on the first run or on
// a later run; then the fault heals.
func runWholeFault(t *testing.T, e *env, reg reconcile.Registry, fn *faultNet, f wholeFault, later bool) {
	t.Helper()
	var before map[string]store.SpecRecord
	var snap *invariant.State
	rev := int64(0)
	if later {
		wantResult(t, e.run(reg), api.ResultSucceeded)
		before = e.specs(reg.Name)
		if len(before) != len(matrixSpecs) {
			t.Fatalf("healthy first run stored %d specs, want %d", len(before), len(matrixSpecs))
		}
		rev = e.revision()
		snap = invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true})
	}
	fn.set(f.net, f.http)
	run := e.run(reg)
	wantResult(t, run, api.ResultFetchFailed)
	if run.Counts != (store.RunCounts{}) || run.Ops.Deletes != 0 {
		t.Fatalf("a failed fetch changed specs: counts %+v ops %+v", run.Counts, run.Ops)
	}
	st := e.status(reg.Name)
	if st.LastRun.Result != api.ResultFetchFailed || !errorHasAny(st.LastRun.Error, f.want) {
		t.Fatalf("status %q / %q does not name the fault (want one of %q)", st.LastRun.Result, st.LastRun.Error, f.want)
	}
	t.Logf("recorded: %s", st.LastRun.Error)
	after := e.specs(reg.Name)
	if len(after) != len(before) {
		t.Fatalf("the fault changed the stored specs: %d before, %d after", len(before), len(after))
	}
	for n, r := range after {
		b := before[n]
		if r.State != api.SpecActive || r.Digest != b.Digest || !r.UpdatedAt.Equal(b.UpdatedAt) || r.ID != b.ID {
			t.Fatalf("spec %s was touched during the fault: %+v", n, r)
		}
	}
	if e.revision() != rev {
		t.Fatalf("the catalog revision moved during a fault: %d -> %d", rev, e.revision())
	}
	snap = invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Previous: snap})

	fn.set(netOK, nil)
	healed := e.run(reg)
	wantResult(t, healed, api.ResultSucceeded)
	if later && healed.Counts.Unchanged != len(matrixSpecs) {
		t.Fatalf("healed run: counts %+v, want %d unchanged", healed.Counts, len(matrixSpecs))
	}
	if !later && healed.Counts.Created != len(matrixSpecs) {
		t.Fatalf("healed run: counts %+v, want %d created", healed.Counts, len(matrixSpecs))
	}
	invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Previous: snap})
}

func TestFaultMatrixOCI(t *testing.T) {
	t.Parallel()
	for _, f := range ociWholeFaults() {
		for _, later := range []bool{false, true} {
			t.Run(f.name+"/"+runName(later), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				rig := newOCIFaultRig(t, "oci")
				for _, n := range matrixSpecs {
					rig.pushSpec(t, "specs/"+n, specYAML(n))
				}
				runWholeFault(t, e, rig.reg, rig.fn, f, later)
			})
		}
	}
}

func TestFaultMatrixHTTP(t *testing.T) {
	t.Parallel()
	for _, f := range httpWholeFaults() {
		for _, later := range []bool{false, true} {
			t.Run(f.name+"/"+runName(later), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				rig := newHTTPFaultRig(t, "index")
				rig.setDoc(matrixSpecs...)
				runWholeFault(t, e, rig.reg, rig.fn, f, later)
			})
		}
	}
}

func runName(later bool) string {
	if later {
		return "later run"
	}
	return "first run"
}

// entryFault breaks one entry of the registry; the others are served.
type entryFault struct {
	name string
	// breakIt breaks specs/redis (pushes a bad image or installs a fault).
	breakIt func(t *testing.T, rig *ociFaultRig)
	want    string
}

func ociEntryFaults() []entryFault {
	return []entryFault{
		{name: "one manifest 404 among many", breakIt: func(t *testing.T, rig *ociFaultRig) {
			rig.fn.set(netOK, status(404, "", func(r *http.Request) bool {
				return r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v2/specs/redis/manifests/sha256:")
			}))
		}, want: "404"},
		{name: "one config blob 500 among many", breakIt: func(t *testing.T, rig *ociFaultRig) {
			rig.fn.set(netOK, status(500, "", func(r *http.Request) bool {
				return strings.HasPrefix(r.URL.Path, "/v2/specs/redis/blobs/")
			}))
		}, want: "500"},
		{name: "garbage base64 label", breakIt: func(t *testing.T, rig *ociFaultRig) {
			rig.pushLabel(t, "specs/redis", "bm90IHZhbGlk!!!@@@###ZGF0YQ==$$$")
		}, want: "label"},
		{name: "garbage YAML label", breakIt: func(t *testing.T, rig *ociFaultRig) {
			rig.pushLabel(t, "specs/redis", base64.StdEncoding.EncodeToString([]byte("name: redis\nplans: [ {name: x, description: : : }\n\t- ]]")))
		}, want: "label"},
		{name: "invalid spec label", breakIt: func(t *testing.T, rig *ociFaultRig) {
			rig.pushSpec(t, "specs/redis", "name: redis\ndescription: no plans\nplans: []\n")
		}, want: "plan"},
		{name: "oversized label", breakIt: func(t *testing.T, rig *ociFaultRig) {
			big := specYAML("redis") + "# " + strings.Repeat("x", spec.MaxSpecBytes) + "\n"
			rig.pushSpec(t, "specs/redis", big)
		}, want: "more than the"},
	}
}

// One broken entry among many: the others are served; on a later run the
// broken one keeps its last good version, active, with the error recorded
// against it; on a first run it is not created and the error is recorded.
func TestFaultMatrixOCIEntries(t *testing.T) {
	t.Parallel()
	for _, f := range ociEntryFaults() {
		for _, later := range []bool{false, true} {
			t.Run(f.name+"/"+runName(later), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				rig := newOCIFaultRig(t, "oci")
				for _, n := range matrixSpecs {
					rig.pushSpec(t, "specs/"+n, specYAML(n))
				}
				var before map[string]store.SpecRecord
				var snap *invariant.State
				if later {
					wantResult(t, e.run(rig.reg), api.ResultSucceeded)
					before = e.specs("oci")
					snap = invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true})
				}
				if later {
					// A new instance reads only the manifests a tag moved
					// to (the run's hints give the others back, as a warm
					// instance's cache does): redis moves to a version
					// that a fault keeps from being read (the label
					// faults push their own).
					rig.pushSpec(t, "specs/redis", changedSpec("redis"))
				}
				f.breakIt(t, rig)
				rig.coldStart(t)
				run := e.run(rig.reg)
				wantResult(t, run, api.ResultSucceeded)
				if run.Counts.Marked != 0 || run.Counts.Deleted != 0 {
					t.Fatalf("a broken entry marked or deleted: %+v", run.Counts)
				}
				if run.Counts.EntryErrors != 1 || len(run.Errors) != 1 || run.Errors[0].Entry != "specs/redis" || !strings.Contains(run.Errors[0].Message, f.want) {
					t.Fatalf("entry errors %+v (count %d), want one for specs/redis naming %q", run.Errors, run.Counts.EntryErrors, f.want)
				}
				st := e.status("oci")
				if len(st.LastRun.Errors) != 1 || st.LastRun.Errors[0].Entry != "specs/redis" {
					t.Fatalf("status errors %+v, want specs/redis", st.LastRun.Errors)
				}
				specs := e.specs("oci")
				if later {
					redis := specs["redis"]
					if redis.State != api.SpecActive || redis.Digest != before["redis"].Digest || redis.EntryError == "" {
						t.Fatalf("broken entry's spec %+v: want its last good version, active, with the entry error", redis)
					}
					if got := activeNames(specs); len(got) != 3 {
						t.Fatalf("active %v, want all three", got)
					}
				} else {
					if _, ok := specs["redis"]; ok {
						t.Fatal("a broken entry was created")
					}
					if got := activeNames(specs); strings.Join(got, ",") != "postgres,rabbitmq" {
						t.Fatalf("active %v, want postgres,rabbitmq", got)
					}
				}
				snap = invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Previous: snap})

				// Heal: redis good again, with the same id it had (or
				// would have had).
				rig.fn.set(netOK, nil)
				rig.pushSpec(t, "specs/redis", specYAML("redis"))
				healed := e.run(rig.reg)
				wantResult(t, healed, api.ResultSucceeded)
				got := e.specs("oci")["redis"]
				if got.State != api.SpecActive || got.EntryError != "" || got.ID != spec.DeriveSpecID("oci", "redis") {
					t.Fatalf("healed redis %+v", got)
				}
				invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Previous: snap})
			})
		}
	}
}

// A tag that answers 404 is the rule's "no longer offered": the spec is
// marked (hidden, kept, same id), never deleted in that run, and unmarked
// with its id when the tag answers again.
func TestFaultMatrixOCITagVanishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rig := newOCIFaultRig(t, "oci")
	for _, n := range matrixSpecs {
		rig.pushSpec(t, "specs/"+n, specYAML(n))
	}
	wantResult(t, e.run(rig.reg), api.ResultSucceeded)
	id := e.specs("oci")["redis"].ID
	snap := invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true})
	rig.fn.set(netOK, status(404, "", func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/v2/specs/redis/manifests/") }))
	run := e.run(rig.reg)
	if run.Counts.Marked != 1 || run.Counts.Deleted != 0 {
		t.Fatalf("counts %+v, want redis marked, nothing deleted", run.Counts)
	}
	if got := e.specs("oci")["redis"]; got.State != api.SpecMarked || got.ID != id {
		t.Fatalf("redis %+v, want marked with id %s", got, id)
	}
	snap = invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Previous: snap})
	rig.fn.set(netOK, nil)
	run = e.run(rig.reg)
	if run.Counts.Unmarked != 1 {
		t.Fatalf("counts %+v, want redis unmarked", run.Counts)
	}
	invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Previous: snap})
}

// The catalog's page k failing (k = 1, 2, 3), through the reference
// registry's real pagination: the listing is unknown, nothing changes.
func TestFaultMatrixCatalogPageK(t *testing.T) {
	t.Parallel()
	names := []string{"a-db", "b-cache", "c-queue", "d-web", "e-store", "f-log", "g-mail"}
	for _, k := range []int{1, 2, 3} {
		t.Run("page "+strconv.Itoa(k), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			pr := &pageRecorder{}
			host := pr.serve(t)
			oci := &ociServer{faults: &faults{}, host: host}
			for _, n := range names {
				oci.pushSpec(t, "specs/"+n, specYAML(n))
			}
			reg := oci.registry(t, "paged", 2)
			wantResult(t, e.run(reg), api.ResultSucceeded)
			pages := pr.seen()
			if len(pages) < 4 {
				t.Fatalf("the healthy listing had %d catalog pages (%q), want at least 4", len(pages), pages)
			}
			snap := invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true})
			pr.fail(pages[k-1])
			run := e.run(reg)
			wantResult(t, run, api.ResultFetchFailed)
			if !strings.Contains(run.Error, fmt.Sprintf("catalog page %d", k)) || !strings.Contains(run.Error, "500") {
				t.Fatalf("error %q does not name page %d and its 500", run.Error, k)
			}
			if st := e.status("paged"); st.LastRun.Error != run.Error {
				t.Fatalf("status error %q, run error %q", st.LastRun.Error, run.Error)
			}
			if got := activeNames(e.specs("paged")); len(got) != len(names) {
				t.Fatalf("after page %d failed %d specs are active, want %d", k, len(got), len(names))
			}
			snap = invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Previous: snap})
			pr.fail("")
			wantResult(t, e.run(reg), api.ResultSucceeded)
			invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Previous: snap})
		})
	}
}

// pageRecorder serves the reference registry, records the n/last query of
// each catalog page request and fails the one named (with its retries).
type pageRecorder struct {
	mu      sync.Mutex
	pages   []string
	failing string
}

func (p *pageRecorder) serve(t *testing.T) string {
	t.Helper()
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	cfg.Catalog.MaxEntries = 1000
	logrus.SetOutput(io.Discard)
	app := handlers.NewApp(context.Background(), cfg)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if catalogReq(r) {
			page := "last=" + r.URL.Query().Get("last")
			p.mu.Lock()
			fail := p.failing != "" && p.failing == page
			if len(p.pages) == 0 || p.pages[len(p.pages)-1] != page {
				p.pages = append(p.pages, page)
			}
			p.mu.Unlock()
			if fail {
				http.Error(w, "catalog page failed", http.StatusInternalServerError)
				return
			}
		}
		app.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func (p *pageRecorder) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.pages...)
}

func (p *pageRecorder) fail(page string) {
	p.mu.Lock()
	p.failing = page
	p.mu.Unlock()
}

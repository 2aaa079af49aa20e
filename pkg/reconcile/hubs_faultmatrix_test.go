package reconcile_test

// The registry fault matrix for the registries without a catalog API
// (Docker Hub, GHCR): their listing APIs and registries in process
// (emulator/hubs), on one TLS host behind the fault network, a private
// namespace that the API and the registry both guard. Every way a listing
// fails, on the first and on a later run, changes nothing but the status;
// then a broken, a vanishing and a returning entry through the runner.
// Each case ends with the invariant checker.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/hubs"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
)

// hubRig is a Docker Hub namespace or a GHCR owner ("acme", private)
// served as "example.com" over the fault network.
type hubRig struct {
	kind   string // "dockerhub" or "ghcr"
	fn     *faultNet
	host   http.Handler // the API and the registry on one host
	plain  string       // host[:port] to push to, past the token service
	add    func(name string)
	remove func(name string)
	reg    reconcile.Registry
}

const hubSecret = "hub-secret-0123456789abcdef"

func newHubRig(t *testing.T, kind, name string) *hubRig {
	t.Helper()
	a := hubs.NewAccounts()
	a.Add("robot", hubSecret)
	a.Grant("acme", "robot")
	rig := &hubRig{kind: kind}
	var store *hubs.Registry
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(hubSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case "dockerhub":
		hub := hubs.NewDockerHub(a)
		hub.SetRepositories("acme")
		store = hubs.NewDockerHubRegistry(a)
		rig.host = hubs.OneHost(hub, store)
		rig.add = func(n string) { hub.Add("acme", hubs.HubRepository{Name: n, Private: true}) }
		rig.remove = func(n string) { hub.Remove("acme", n) }
	case "ghcr":
		gh := hubs.NewGitHub(a)
		gh.SetPackages("acme", true)
		store = hubs.NewGHCRRegistry(a)
		rig.host = hubs.OneHost(gh, store)
		rig.add = func(n string) { gh.Add("acme", hubs.Package{Name: n, Visibility: "private"}) }
		rig.remove = func(n string) { gh.Remove("acme", n) }
	}
	store.SetPrivate("acme", true)
	rig.fn = newFaultNet(t, rig.host)
	plain := httptest.NewServer(store.Storage())
	t.Cleanup(plain.Close)
	rig.plain = strings.TrimPrefix(plain.URL, "http://")

	var src registry.Source
	var err error
	switch kind {
	case "dockerhub":
		src, err = registry.NewDockerHub(registry.DockerHubConfig{Namespace: "acme", APIURL: "https://example.com", Host: "example.com",
			Auth: registry.Auth{Type: "basic", Username: "robot", PasswordFile: secret}, PageSize: 1,
			Timeout: faultTimeout, Transport: rig.fn.transport})
	case "ghcr":
		src, err = registry.NewGHCR(registry.GHCRConfig{Owner: "acme", OwnerType: "org", APIURL: "https://example.com", Host: "example.com",
			Auth: registry.Auth{Type: "token", TokenFile: secret}, PageSize: 1, Timeout: faultTimeout, Transport: rig.fn.transport})
	}
	if err != nil {
		t.Fatal(err)
	}
	rig.reg = reconcile.Registry{Name: name, Source: src, Policy: defaultPolicy}
	return rig
}

// pushSpec pushes a spec image as acme/name and lists it.
func (h *hubRig) pushSpec(t *testing.T, name, yamlText string) {
	t.Helper()
	h.pushLabel(t, name, base64.StdEncoding.EncodeToString([]byte(yamlText)))
	h.add(name)
}

func (h *hubRig) pushLabel(t *testing.T, name, label string) {
	t.Helper()
	if _, err := emulator.PushSpecImage(t.Context(), h.plain, "acme/"+name, "latest", label, nil); err != nil {
		t.Fatalf("push %s: %v", name, err)
	}
}

// listing matches the API's list pages (page k; 0: every page).
func (h *hubRig) listing(k int) match {
	suffix := "/repositories"
	if h.kind == "ghcr" {
		suffix = "/packages"
	}
	return func(r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, suffix) {
			return false
		}
		p := r.URL.Query().Get("page")
		return k == 0 || p == strconv.Itoa(k) || (p == "" && k == 1)
	}
}

// rewrite answers the requests m matches with what the host answers,
// edited: a page that lies in the API's own shape.
func (h *hubRig) rewrite(m match, edit func(header http.Header, body []byte) []byte) httpFault {
	return when(m, func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.host.ServeHTTP(rec, r)
		body := edit(rec.Header(), rec.Body.Bytes())
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

// editLink edits the URL of one relation of a Link header.
func editLink(header http.Header, rel string, edit func(string) string) {
	parts := strings.Split(header.Get("Link"), ", ")
	for i, p := range parts {
		if strings.HasSuffix(p, `rel="`+rel+`"`) {
			parts[i] = edit(p)
		}
	}
	header.Set("Link", strings.Join(parts, ", "))
}

// pageFaults are the ways one page of the listing lies, in each API's
// shape (3 entries at 1 a page: 3 pages).
func (h *hubRig) pageFaults() []wholeFault {
	page2 := h.listing(2)
	hub := func(edit func(p *hubs.HubPage)) func(http.Header, []byte) []byte {
		return func(_ http.Header, body []byte) []byte {
			var p hubs.HubPage
			if err := json.Unmarshal(body, &p); err != nil {
				return body
			}
			edit(&p)
			b, _ := json.Marshal(p)
			return b
		}
	}
	if h.kind == "dockerhub" {
		return []wholeFault{
			{name: "page 2 cut short", http: h.rewrite(page2, hub(func(p *hubs.HubPage) { p.Results = p.Results[:0] })), want: []string{"cut short"}},
			{name: "total changes on page 2", http: h.rewrite(page2, hub(func(p *hubs.HubPage) { p.Count++ })), want: []string{"count of repositories changed"}},
			{name: "page 2 links to itself", http: h.rewrite(page2, hub(func(p *hubs.HubPage) {
				again := strings.Replace(*p.Next, "page=3", "page=2", 1)
				p.Next = &again
			})), want: []string{"links back to page 2"}},
			{name: "login refused", http: status(401, "", func(r *http.Request) bool { return r.URL.Path == "/v2/auth/token" }), want: []string{"login as robot", "401"}},
		}
	}
	return []wholeFault{
		{name: "page 2 cut short", http: h.rewrite(page2, func(http.Header, []byte) []byte { return []byte("[]") }), want: []string{"cut short"}},
		{name: "total changes on page 2", http: h.rewrite(page2, func(header http.Header, body []byte) []byte {
			editLink(header, "last", func(s string) string { return strings.Replace(s, "page=3", "page=4", 1) })
			return body
		}), want: []string{"number of pages changed from 3 to 4"}},
		{name: "page 2 links to itself", http: h.rewrite(page2, func(header http.Header, body []byte) []byte {
			editLink(header, "next", func(s string) string { return strings.Replace(s, "page=3", "page=2", 1) })
			return body
		}), want: []string{"links back to page 2"}},
		{name: "primary rate limit", http: when(page2, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Ratelimit-Remaining", "0")
			w.Header().Set("X-Ratelimit-Reset", "4102444800")
			http.Error(w, `{"message":"API rate limit exceeded"}`, http.StatusForbidden)
		}), want: []string{"rate limited", "resets at 2100-01-01"}},
	}
}

// hubWholeFaults are the faults of the whole fault matrix, at the
// listing API, plus each API's lying pages.
func (h *hubRig) wholeFaults() []wholeFault {
	every, page2 := h.listing(0), h.listing(2)
	faults := []wholeFault{
		{name: "connection refused", net: netRefused, want: []string{"connection refused"}},
		{name: "DNS failure", net: netDNS, want: []string{"no such host"}},
		{name: "TLS failure", net: netTLS, want: []string{"x509", "certificate"}},
		{name: "401", http: status(401, "", every), want: []string{"401"}},
		{name: "403", http: status(403, "", every), want: []string{"403"}},
		{name: "429 with Retry-After", http: status(429, "3600", page2), want: []string{"page 2", "429", "Retry-After: 3600"}},
		{name: "page 2 500", http: status(500, "", page2), want: []string{"page 2", "500"}},
		{name: "page 2 503", http: status(503, "", page2), want: []string{"page 2", "503"}},
		{name: "page 2 slow headers", http: slowHeaders(page2), want: []string{"did not finish within"}},
		{name: "page 2 slow body", http: slowBody(page2), want: []string{"did not finish within"}},
		{name: "page 2 truncated body", http: truncated(page2), want: []string{"page 2", "unexpected EOF"}},
		{name: "page 2 garbage body", http: garbage(page2), want: []string{"page 2", "not a page of"}},
		{name: "token service down", http: status(503, "", func(r *http.Request) bool { return r.URL.Path == "/token" }),
			want: []string{"all 3 repositories failed"}},
	}
	return append(faults, h.pageFaults()...)
}

// A listing API that fails in any way, on the first run or a later one,
// marks nothing, deletes nothing and writes nothing but the status, which
// names the fault; the catalog revision stays; the healed run changes
// nothing more (or creates everything, on a first run).
func TestFaultMatrixHubs(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"dockerhub", "ghcr"} {
		for _, f := range newHubRig(t, kind, "probe").wholeFaults() {
			for _, later := range []bool{false, true} {
				t.Run(kind+"/"+f.name+"/"+runName(later), func(t *testing.T) {
					t.Parallel()
					e := newEnv(t)
					rig := newHubRig(t, kind, kind)
					for _, n := range matrixSpecs {
						rig.pushSpec(t, n, specYAML(n))
					}
					// The fault was made for the probe rig: make it again
					// for this one (a rewrite serves from its own host).
					for _, g := range rig.wholeFaults() {
						if g.name == f.name {
							f = g
						}
					}
					runWholeFault(t, e, rig.reg, rig.fn, f, later)
				})
			}
		}
	}
}

// Through the runner: a broken entry keeps its last good version, an
// entry the API stops listing is marked (same id, not deleted), and
// unmarked when it is listed again; a failed page in between marks
// nothing, though the entry is still missing from what was listed.
func TestScenarioHubEntries(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"dockerhub", "ghcr"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			rig := newHubRig(t, kind, kind)
			for _, n := range matrixSpecs {
				rig.pushSpec(t, n, specYAML(n))
			}
			run := e.run(rig.reg)
			if run.Counts.Created != 3 {
				t.Fatalf("first run: %+v (%s)", run.Counts, run.Error)
			}
			before := e.specs(kind)
			snap := invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true})

			rig.pushLabel(t, "redis", "bm90IHZhbGlk!!!")
			rig.remove("rabbitmq")
			// The listing fails at its second page: nothing is marked,
			// though rabbitmq is gone.
			rig.fn.set(netOK, status(500, "", rig.listing(2)))
			wantResult(t, e.run(rig.reg), api.ResultFetchFailed)
			if got := activeNames(e.specs(kind)); len(got) != 3 {
				t.Fatalf("after a failed page: active %v", got)
			}
			snap = invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Previous: snap})

			rig.fn.set(netOK, nil)
			run = e.run(rig.reg)
			wantResult(t, run, api.ResultSucceeded)
			specs := e.specs(kind)
			if run.Counts.Marked != 1 || run.Counts.EntryErrors != 1 || specs["rabbitmq"].State != api.SpecMarked {
				t.Fatalf("rabbitmq gone, redis broken: counts %+v, rabbitmq %+v", run.Counts, specs["rabbitmq"])
			}
			if r := specs["redis"]; r.State != api.SpecActive || r.Digest != before["redis"].Digest || r.EntryError == "" {
				t.Fatalf("broken redis %+v: want its last good version, active, with the entry error", r)
			}
			snap = invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Previous: snap})

			rig.add("rabbitmq")
			rig.pushSpec(t, "redis", specYAML("redis"))
			run = e.run(rig.reg)
			specs = e.specs(kind)
			if run.Counts.Unmarked != 1 || specs["rabbitmq"].State != api.SpecActive || specs["rabbitmq"].ID != spec.DeriveSpecID(kind, "rabbitmq") {
				t.Fatalf("rabbitmq back: counts %+v, %+v", run.Counts, specs["rabbitmq"])
			}
			if specs["redis"].EntryError != "" {
				t.Fatalf("healed redis still has its error: %+v", specs["redis"])
			}
			invariant.Require(t, e.client, invariant.Options{Settled: true, Feed: true, Previous: snap})

			// The secret is in no document (the checker looks for it too).
			var all bytes.Buffer
			for _, r := range e.specs(kind) {
				all.WriteString(r.EntryError)
			}
			if st := e.status(kind); strings.Contains(st.LastRun.Error+all.String(), hubSecret) {
				t.Fatal("a secret reached the store")
			}
			invariant.Require(t, e.client, invariant.Options{Settled: true, Canaries: []string{hubSecret}})
		})
	}
}

package registry_test

// The conformance suite: one table of shapes and faults that every source
// runs (go-cloud's drivertest habit), so that a new source is a file in
// pkg/registry plus a driver here, and every source keeps the same
// promises: a failed or partial listing is the fetch's error (the run then
// marks nothing), a broken entry is that entry's error (it keeps its last
// good version), an entry that goes away is absent and comes back under
// the same name, and an unchanged upstream lists with an unchanged digest.
//
// Faults are injected in front of a source's own upstream (an in-process
// registry, index server or API server that speaks its documented
// protocol), never into the source.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/emulator/googletest"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/helmtest"
)

// upstream is what one source reads, as a driver sets it up for one case.
type upstream interface {
	// put makes entry offer a valid spec (the YAML of specYAML).
	put(t *testing.T, entry, specYAML string)
	// putBroken makes entry present upstream but broken: its content
	// does not parse or validate.
	putBroken(t *testing.T, entry string)
	// remove makes entry gone upstream.
	remove(t *testing.T, entry string)
	// unavailable makes the whole upstream unreachable.
	unavailable(t *testing.T)
	// source is a source reading the upstream.
	source(t *testing.T, c suiteConfig) registry.Source
}

// faulty is an upstream reached over HTTP, where the suite injects faults.
type faulty interface {
	upstream
	// setFault puts f in front of every request upstream; f answers the
	// request itself when it returns true.
	setFault(f func(w http.ResponseWriter, r *http.Request) bool)
	// isListing says whether a request lists entries (a catalog or API
	// page, the index), not an entry's own content.
	isListing(r *http.Request) bool
}

// suiteConfig is what a case asks of the source it is given.
type suiteConfig struct {
	pageSize int           // listing page size, where the source pages
	timeout  time.Duration // bound of a whole fetch
}

// driver makes the upstream of one kind of source.
type driver struct {
	name string
	new  func(t *testing.T) upstream
	// paginates says the listing comes in pages of pageSize, so a fault
	// can hit a page after the first.
	paginates bool
}

var drivers = []driver{
	{name: "oci", new: newOCIUpstream, paginates: true},
	{name: "oci-artifact-registry", new: newARUpstream, paginates: true},
	{name: "http", new: newIndexUpstream},
	{name: "dir", new: newDirUpstream},
	{name: "dockerhub", new: func(t *testing.T) upstream { return newDockerHubRig(t) }, paginates: true},
	{name: "ghcr", new: func(t *testing.T) upstream { return newGHCRRig(t) }, paginates: true},
	{name: "helm-repository", new: newHelmRepoUpstream},
	{name: "helm-oci", new: newHelmOCIUpstream},
	{name: "quay", new: func(t *testing.T) upstream { return newQuayRig(t) }, paginates: true},
	{name: "git", new: func(t *testing.T) upstream { return newGitRig(t) }},
}

func TestConformance(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			runConformance(t, d)
		})
	}
}

func runConformance(t *testing.T, d driver) {
	quick := suiteConfig{pageSize: 3, timeout: 5 * time.Second}
	t.Run("empty", func(t *testing.T) {
		u := d.new(t)
		src := u.source(t, quick)
		l := fetch(t, src)
		if len(l.Entries) != 0 {
			t.Fatalf("an empty upstream lists %v", names(l))
		}
		if again := fetch(t, src); again.Digest != l.Digest {
			t.Errorf("an unchanged empty upstream changed digest: %s then %s", l.Digest, again.Digest)
		}
	})
	t.Run("entries and pages", func(t *testing.T) {
		u := d.new(t)
		var want []string
		for i := range 7 { // more than two pages of 3
			e := fmt.Sprintf("svc-%d", i)
			u.put(t, e, specYAML(e))
			want = append(want, e)
		}
		src := u.source(t, quick)
		l := fetch(t, src)
		if got := names(l); !slices.Equal(got, want) {
			t.Fatalf("entries %v, want %v", got, want)
		}
		for _, e := range l.Entries {
			if e.Err != nil || e.Spec == nil || e.Spec.Name != e.Name || e.Ref == "" {
				t.Errorf("entry %s: spec %v, ref %q, err %v", e.Name, e.Spec, e.Ref, e.Err)
			}
		}
		if again := fetch(t, src); again.Digest != l.Digest {
			t.Errorf("an unchanged upstream changed digest: %s then %s", l.Digest, again.Digest)
		}
	})
	t.Run("garbage entry among good ones", func(t *testing.T) {
		u := d.new(t)
		u.put(t, "alpha", specYAML("alpha"))
		u.putBroken(t, "beta")
		u.put(t, "gamma", specYAML("gamma"))
		l := fetch(t, u.source(t, quick))
		got := byName(l)
		if len(got) != 3 {
			t.Fatalf("entries %v, want alpha, beta, gamma", names(l))
		}
		if b := got["beta"]; b.Err == nil || b.Spec != nil {
			t.Errorf("the broken entry: spec %v, err %v; want its own error", b.Spec, b.Err)
		}
		for _, e := range []string{"alpha", "gamma"} {
			if got[e].Spec == nil || got[e].Err != nil {
				t.Errorf("%s beside a broken entry: spec %v, err %v", e, got[e].Spec, got[e].Err)
			}
		}
	})
	t.Run("entry gone, entry back", func(t *testing.T) {
		u := d.new(t)
		u.put(t, "alpha", specYAML("alpha"))
		u.put(t, "beta", specYAML("beta"))
		src := u.source(t, quick)
		before := fetch(t, src)
		u.remove(t, "beta")
		gone := fetch(t, src)
		if got := names(gone); !slices.Equal(got, []string{"alpha"}) {
			t.Fatalf("after removing beta: %v", got)
		}
		if gone.Digest == before.Digest {
			t.Error("an entry went and the digest did not change")
		}
		u.put(t, "beta", specYAML("beta"))
		back := fetch(t, src)
		if got := names(back); !slices.Equal(got, []string{"alpha", "beta"}) {
			t.Fatalf("after beta came back: %v", got)
		}
		if b := byName(back)["beta"]; b.Spec == nil || b.Spec.Name != "beta" {
			t.Errorf("beta back: %+v", b)
		}
	})
	t.Run("upstream unavailable", func(t *testing.T) {
		u := d.new(t)
		u.put(t, "alpha", specYAML("alpha"))
		src := u.source(t, quick)
		fetch(t, src)
		u.unavailable(t)
		fetchFails(t, src)
	})

	// The faults of a listing over HTTP: each fails the fetch whole, with
	// an error of its class (registry.Status's code and Retry-After, a
	// truncated or unparseable body, a timeout) whose text, which the
	// registry's status records, says so.
	for _, f := range []struct {
		name string
		// on is the first listing request to break: 1 the first, 2 the
		// second (a page after the first, where the source pages); every
		// listing request from it on fails the same way, so a retry of
		// the page meets the fault again.
		on    int
		fault func(w http.ResponseWriter, r *http.Request)
		// class checks the fetch's error.
		class func(t *testing.T, err error)
	}{
		{"401", 1, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("WWW-Authenticate", `Basic realm="conformance"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
		}, statusClass(http.StatusUnauthorized, "", "401", "UNAUTHORIZED")},
		{"429 with Retry-After", 1, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3600")
			http.Error(w, `{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}`, http.StatusTooManyRequests)
		}, statusClass(http.StatusTooManyRequests, "3600", "Retry-After: 3600")},
		{"5xx", 1, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream is down", http.StatusServiceUnavailable)
		}, statusClass(http.StatusServiceUnavailable, "", "503")},
		{"5xx on a later page", 2, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream is down", http.StatusInternalServerError)
		}, statusClass(http.StatusInternalServerError, "", "500")},
		{"partial page", 2, truncate, func(t *testing.T, err error) {
			if code, _ := registry.Status(err); code != 0 || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("a truncated page: status %d, error %q; want no status and io.ErrUnexpectedEOF", code, err)
			}
		}},
		{"garbage page", 2, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"repositories": ["svc-3", ]]] garbage`) // whole, and no JSON or YAML
		}, func(t *testing.T, err error) {
			if code, _ := registry.Status(err); code != 0 || !registry.Malformed(err) {
				t.Errorf("a garbage page: status %d, error %q; want no status and registry.Malformed", code, err)
			}
		}},
		{"timeout", 1, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		}, func(t *testing.T, err error) {
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not finish within") {
				t.Errorf("a timeout: error %q; want context.DeadlineExceeded, saying the fetch did not finish within its bound", err)
			}
		}},
	} {
		t.Run(f.name, func(t *testing.T) {
			u := d.new(t)
			fu, ok := u.(faulty)
			if !ok {
				t.Skip("not read over HTTP (a directory): its one fault is the upstream unavailable")
			}
			on := f.on
			if on > 1 && !d.paginates {
				if f.name == "5xx on a later page" {
					t.Skip("the listing is one request: there is no later page")
				}
				on = 1 // one listing request: the fault is on it
			}
			for i := range 7 {
				e := fmt.Sprintf("svc-%d", i)
				u.put(t, e, specYAML(e))
			}
			cfg := quick
			if f.name == "timeout" {
				cfg.timeout = 300 * time.Millisecond
			}
			src := u.source(t, cfg)
			var mu sync.Mutex
			seen := 0
			fu.setFault(func(w http.ResponseWriter, r *http.Request) bool {
				if !fu.isListing(r) {
					return false
				}
				mu.Lock()
				seen++
				hit := seen >= on
				mu.Unlock()
				if hit {
					f.fault(w, r)
				}
				return hit
			})
			err := fetchFails(t, src)
			f.class(t, err)
			mu.Lock()
			if seen < on {
				t.Errorf("the fetch made %d listing requests; the fault was on request %d", seen, on)
			}
			mu.Unlock()
			// The next fetch, without the fault, lists everything (a new
			// instance after the timeout, whose bound is short for a
			// loaded machine).
			fu.setFault(nil)
			if f.name == "timeout" {
				src = u.source(t, quick)
			}
			if l := fetch(t, src); len(l.Entries) != 7 {
				t.Errorf("after the fault (%v) the upstream lists %d entries, want 7", err, len(l.Entries))
			}
		})
	}
}

// statusClass checks that a fetch failed on the upstream's status code,
// with its Retry-After, and that its text names them (one of says).
func statusClass(code int, retryAfter string, says ...string) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		got, ra := registry.Status(err)
		if got != code || ra != retryAfter {
			t.Errorf("status %d, Retry-After %q; want %d, %q (error %q)", got, ra, code, retryAfter, err)
		}
		if !slices.ContainsFunc(says, func(w string) bool { return strings.Contains(err.Error(), w) }) {
			t.Errorf("error %q names none of %v", err, says)
		}
	}
}

// truncate promises a body and sends half of it, then hangs up.
func truncate(w http.ResponseWriter, r *http.Request) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	body := `{"repositories":["svc-3","svc-4","svc-5"]}`
	fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body)+40, body[:len(body)/2])
	buf.Flush()
}

// ociUpstream is the reference registry in process (it paginates its
// catalog with Link headers), with deletes enabled so an entry can go.
type ociUpstream struct {
	*server
}

func newOCIUpstream(t *testing.T) upstream {
	t.Helper()
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}, "delete": configuration.Parameters{"enabled": true}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	cfg.Catalog.MaxEntries = 1000
	return &ociUpstream{serve(t, handlers.NewApp(context.Background(), cfg))}
}

func (u *ociUpstream) put(t *testing.T, entry, yamlText string) { u.pushSpec(t, entry, yamlText) }

func (u *ociUpstream) putBroken(t *testing.T, entry string) {
	u.pushImage(t, entry, "latest", image(t, map[string]string{"com.redhat.apb.spec": "%%% neither base64 nor YAML: ["}, nil))
}

func (u *ociUpstream) remove(t *testing.T, entry string) {
	t.Helper()
	desc, err := remote.Head(u.ref(t, entry, "latest"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := name.NewDigest(u.host+"/"+entry+"@"+desc.Digest.String(), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(d); err != nil {
		t.Fatalf("delete %s: %v", d, err)
	}
}

func (u *ociUpstream) unavailable(*testing.T) {
	u.setFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "gone", http.StatusServiceUnavailable)
		return true
	})
}

func (u *ociUpstream) source(t *testing.T, c suiteConfig) registry.Source {
	return u.oci(t, registry.OCIConfig{PageSize: c.pageSize, Timeout: c.timeout})
}

func (u *ociUpstream) isListing(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/v2/_catalog")
}

// indexUpstream is an index document served over HTTP, one item an entry.
type indexUpstream struct {
	mu    sync.Mutex
	items map[string]string // entry -> YAML of the item
	fault func(w http.ResponseWriter, r *http.Request) bool
	down  bool
	url   string
}

func newIndexUpstream(t *testing.T) upstream {
	t.Helper()
	u := &indexUpstream{items: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		fault, down := u.fault, u.down
		var entries []string
		for e := range u.items {
			entries = append(entries, e)
		}
		sort.Strings(entries)
		var docs []string
		for _, e := range entries {
			docs = append(docs, u.items[e])
		}
		u.mu.Unlock()
		if down {
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		if fault != nil && fault(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/yaml")
		if len(docs) == 0 {
			// An empty list; an empty body is a broken answer, not an
			// empty index.
			fmt.Fprint(w, "[]\n")
			return
		}
		fmt.Fprint(w, listDoc(docs...))
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL + "/index.yaml"
	return u
}

func (u *indexUpstream) set(entry, item string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if item == "" {
		delete(u.items, entry)
	} else {
		u.items[entry] = item
	}
}

func (u *indexUpstream) put(_ *testing.T, entry, yamlText string) { u.set(entry, yamlText) }

// putBroken is an item named entry that does not validate (no plans).
func (u *indexUpstream) putBroken(_ *testing.T, entry string) {
	u.set(entry, "name: "+entry+"\ndescription: no plans\n")
}

func (u *indexUpstream) remove(_ *testing.T, entry string) { u.set(entry, "") }

func (u *indexUpstream) unavailable(*testing.T) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.down = true
}

func (u *indexUpstream) setFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.fault = f
}

func (u *indexUpstream) isListing(*http.Request) bool { return true }

func (u *indexUpstream) source(t *testing.T, c suiteConfig) registry.Source {
	return newHTTP(t, registry.HTTPConfig{URL: u.url, Timeout: c.timeout})
}

// dirUpstream is a directory of spec files.
type dirUpstream struct {
	dir string
}

func newDirUpstream(t *testing.T) upstream {
	return &dirUpstream{dir: filepath.Join(t.TempDir(), "specs")}
}

func (u *dirUpstream) write(t *testing.T, entry, content string) {
	t.Helper()
	if err := os.MkdirAll(u.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(u.dir, entry+".yaml"), content); err != nil {
		t.Fatal(err)
	}
}

func (u *dirUpstream) put(t *testing.T, entry, yamlText string) { u.write(t, entry, yamlText) }

func (u *dirUpstream) putBroken(t *testing.T, entry string) { u.write(t, entry, "name: [unclosed") }

func (u *dirUpstream) remove(t *testing.T, entry string) {
	t.Helper()
	if err := os.Remove(filepath.Join(u.dir, entry+".yaml")); err != nil {
		t.Fatal(err)
	}
}

// unavailable removes the directory (a volume that is not mounted).
func (u *dirUpstream) unavailable(t *testing.T) {
	t.Helper()
	if err := os.RemoveAll(u.dir); err != nil {
		t.Fatal(err)
	}
}

func (u *dirUpstream) source(t *testing.T, _ suiteConfig) registry.Source {
	t.Helper()
	if err := os.MkdirAll(u.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := registry.NewDir(registry.DirConfig{FS: os.DirFS(u.dir), Root: u.dir})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func (r *dockerHubRig) source(t *testing.T, c suiteConfig) registry.Source {
	return r.newSource(t, registry.DockerHubConfig{Namespace: suiteNamespace, PageSize: c.pageSize, Timeout: c.timeout})
}

func (r *ghcrRig) source(t *testing.T, c suiteConfig) registry.Source {
	return r.newSource(t, registry.GHCRConfig{Owner: suiteNamespace, OwnerType: "org", PageSize: c.pageSize, Timeout: c.timeout})
}

// helmRepoUpstream is a chart repository: one chart an entry, its index
// the listing.
type helmRepoUpstream struct{ *helmtest.Repo }

func newHelmRepoUpstream(t *testing.T) upstream { return helmRepoUpstream{helmtest.NewRepo(t)} }

// put publishes a chart named entry (the spec text is a spec's, not a
// chart's: a chart's service is named after the chart).
func (u helmRepoUpstream) put(t *testing.T, entry, _ string) {
	u.Add(t, helmtest.Chart{Name: entry, Version: "1.0.0", Description: "the " + entry + " chart"})
}

// putBroken publishes a version whose archive is not a gzipped tar.
func (u helmRepoUpstream) putBroken(t *testing.T, entry string) {
	u.AddVersion(t, helmtest.Version{Chart: helmtest.Chart{Name: entry, Version: "1.0.0"}, Archive: []byte("not a chart archive")})
}

func (u helmRepoUpstream) remove(_ *testing.T, entry string) { u.Remove(entry) }

func (u helmRepoUpstream) unavailable(*testing.T) {
	u.SetFault(func(w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, "gone", http.StatusServiceUnavailable)
		return true
	})
}

func (u helmRepoUpstream) setFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	u.SetFault(f)
}

func (u helmRepoUpstream) isListing(r *http.Request) bool {
	return helmtest.IsIndex(r.Method, r.URL.Path)
}

func (u helmRepoUpstream) source(t *testing.T, c suiteConfig) registry.Source {
	return u.Source(t, registry.HelmConfig{Timeout: c.timeout})
}

// helmOCIUpstream is an OCI registry of charts, one repository a chart.
// go-containerregistry's registry does not paginate its catalog, so the
// source asks for pages larger than the suite's entries.
type helmOCIUpstream struct{ *helmtest.Registry }

func newHelmOCIUpstream(t *testing.T) upstream { return helmOCIUpstream{helmtest.NewRegistry(t)} }

func (u helmOCIUpstream) put(t *testing.T, entry, _ string) {
	u.Push(t, entry, helmtest.Chart{Name: entry, Version: "1.0.0", Description: "the " + entry + " chart"})
}

func (u helmOCIUpstream) putBroken(t *testing.T, entry string) {
	u.PushArtifact(t, entry, "1.0.0", []byte(`{"name":"`+entry+`","version":"1.0.0"}`), []byte("not a chart archive"))
}

func (u helmOCIUpstream) remove(t *testing.T, entry string) { u.Delete(t, entry, "1.0.0") }

func (u helmOCIUpstream) unavailable(*testing.T) {
	u.SetFault(func(w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, "gone", http.StatusServiceUnavailable)
		return true
	})
}

func (u helmOCIUpstream) setFault(f func(w http.ResponseWriter, r *http.Request) bool) { u.SetFault(f) }

func (u helmOCIUpstream) isListing(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/v2/_catalog")
}

func (u helmOCIUpstream) source(t *testing.T, c suiteConfig) registry.Source {
	t.Helper()
	src, err := registry.NewHelm(registry.HelmConfig{Host: u.Host, Insecure: true, PageSize: 1000, Timeout: c.timeout})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// arUpstream is Artifact Registry in process (emulator/googletest: its
// tags/list with children, over HTTPS as europe-docker.pkg.dev), read by
// an oci source with a prefix, which lists it by walking the children:
// the listing is the prefix's tags/list, then each child's.
type arUpstream struct {
	reg  *googletest.Registry
	push *server
}

const arPrefix = "project/specs"

func newARUpstream(t *testing.T) upstream {
	reg := googletest.NewRegistry(t, nil)
	return &arUpstream{reg: reg, push: &server{host: reg.PushHost}}
}

func (u *arUpstream) put(t *testing.T, entry, yamlText string) {
	u.push.pushSpec(t, arPrefix+"/"+entry, yamlText)
}

func (u *arUpstream) putBroken(t *testing.T, entry string) {
	u.push.pushImage(t, arPrefix+"/"+entry, "latest", image(t, map[string]string{"com.redhat.apb.spec": "%%% neither base64 nor YAML: ["}, nil))
}

func (u *arUpstream) remove(t *testing.T, entry string) {
	t.Helper()
	// The stand-in keeps a tag whose manifest is deleted by digest:
	// delete the tag.
	ref := u.push.ref(t, arPrefix+"/"+entry, "latest")
	if err := remote.Delete(ref); err != nil {
		t.Fatalf("delete %s: %v", ref, err)
	}
}

func (u *arUpstream) unavailable(*testing.T) {
	u.reg.SetFault(func(w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, "gone", http.StatusServiceUnavailable)
		return true
	})
}

func (u *arUpstream) setFault(f func(w http.ResponseWriter, r *http.Request) bool) { u.reg.SetFault(f) }

func (u *arUpstream) isListing(r *http.Request) bool {
	return strings.HasSuffix(r.URL.Path, "/tags/list")
}

func (u *arUpstream) source(t *testing.T, c suiteConfig) registry.Source {
	t.Helper()
	src, err := registry.NewOCI(registry.OCIConfig{Host: "europe-docker.pkg.dev", Prefix: arPrefix,
		Transport: googletest.Transport(u.reg.Server), Timeout: c.timeout})
	if err != nil {
		t.Fatal(err)
	}
	return registry.FastRetry(src)
}

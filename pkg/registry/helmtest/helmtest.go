// Package helmtest stands in, in process, for the places Helm charts live:
// a chart repository (an index.yaml and chart archives over HTTP) and an
// OCI registry holding charts as `helm push` leaves them. Chart archives
// are built with archive/tar and compress/gzip, whole or broken on purpose.
// Each server is a constructor returning the server and, from it, a helm
// source, with a fault hook in front (SetFault) that breaks it the way real
// servers break, so the tests of the helm source, of the reconcile and of
// the broker share it. Test support only: no production code imports it.
package helmtest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"

	"github.com/specsync/specsync/pkg/registry"
)

// Chart is a chart a test publishes.
type Chart struct {
	Name, Version, Description string
	AppVersion, Home, Icon     string
	Keywords                   []string
	Deprecated                 bool
	// Type is "application" (empty) or "library".
	Type        string
	Annotations map[string]string
	// Schema is the chart's values.schema.json ("" for none).
	Schema string
	// ChartYAML, when set, is the Chart.yaml as it stands instead of one
	// made from the fields ("-": the archive has none).
	ChartYAML string
	// Files are more files of the chart's directory (path: content).
	Files map[string]string
}

// metadata is the chart's Chart.yaml as a map (helm's chart.Metadata).
func (c Chart) metadata() map[string]any {
	m := map[string]any{"apiVersion": "v2", "name": c.Name, "version": c.Version}
	for k, v := range map[string]string{"description": c.Description, "appVersion": c.AppVersion, "home": c.Home, "icon": c.Icon, "type": c.Type} {
		if v != "" {
			m[k] = v
		}
	}
	if len(c.Keywords) > 0 {
		m["keywords"] = c.Keywords
	}
	if c.Deprecated {
		m["deprecated"] = true
	}
	if len(c.Annotations) > 0 {
		m["annotations"] = c.Annotations
	}
	return m
}

// File is one entry of an archive, for archives no chart tool would make
// (path tricks, links).
type File struct {
	Name, Body string
	// Type is the tar type flag (0: a regular file); Linkname a link's
	// target.
	Type     byte
	Linkname string
}

// TarGz builds a gzipped tar of files, in order.
func TarGz(t testing.TB, files ...File) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		hdr := &tar.Header{Name: f.Name, Mode: 0o644, Size: int64(len(f.Body)), Typeflag: f.Type, Linkname: f.Linkname,
			ModTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
		if f.Type == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := io.WriteString(tw, f.Body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Files are a chart's files as `helm package` lays them out: all in a
// directory named after the chart, Chart.yaml first.
func (c Chart) TarFiles(t testing.TB) []File {
	t.Helper()
	dir := c.Name + "/"
	var files []File
	switch c.ChartYAML {
	case "-":
	case "":
		b, err := yaml.Marshal(c.metadata())
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, File{Name: dir + "Chart.yaml", Body: string(b)})
	default:
		files = append(files, File{Name: dir + "Chart.yaml", Body: c.ChartYAML})
	}
	files = append(files, File{Name: dir + "values.yaml", Body: "replicas: 1\n"})
	if c.Schema != "" {
		files = append(files, File{Name: dir + "values.schema.json", Body: c.Schema})
	}
	names := make([]string, 0, len(c.Files))
	for n := range c.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		files = append(files, File{Name: dir + n, Body: c.Files[n]})
	}
	return files
}

// Archive is the chart's .tgz.
func (c Chart) Archive(t testing.TB) []byte {
	t.Helper()
	return TarGz(t, c.TarFiles(t)...)
}

// ChartYAMLText is the Chart.yaml the chart's archive holds ("" for
// none): what a provenance file repeats.
func (c Chart) ChartYAMLText(t testing.TB) string {
	t.Helper()
	for _, f := range c.TarFiles(t) {
		if f.Name == c.Name+"/Chart.yaml" {
			return f.Body
		}
	}
	return ""
}

// ArchiveName is the archive's file name as `helm package` names it.
func (c Chart) ArchiveName() string { return c.Name + "-" + c.Version + ".tgz" }

// Digest is the SHA-256 of b in hex, as an index writes it.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// server is an httptest server behind a fault hook and a request log.
type server struct {
	srv      *httptest.Server
	mu       sync.Mutex
	fault    func(w http.ResponseWriter, r *http.Request) bool
	requests []string // "METHOD /path"
}

func newServer(t testing.TB, h http.Handler) *server {
	s := &server{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.Path)
		fault := s.fault
		s.mu.Unlock()
		if fault != nil && fault(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// SetFault puts f in front of the server: when it returns true it has
// answered the request itself. nil removes it.
func (s *server) SetFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// Count returns how many requests since the last Reset match.
func (s *server) Count(match func(method, path string) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		method, path, _ := strings.Cut(r, " ")
		if match(method, path) {
			n++
		}
	}
	return n
}

// Reset forgets the requests so far.
func (s *server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Requests lists the requests since the last Reset, for failure messages.
func (s *server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Repo is an in-process chart repository: GET /charts/index.yaml (built
// from the versions added, with an ETag and If-None-Match) and the
// archives under /charts/.
type Repo struct {
	*server
	// URL is the repository URL, as `helm repo add` takes it.
	URL string

	mu       sync.Mutex
	versions map[string][]*Version
	index    *string // served instead of the built index
	archives map[string][]byte
}

// Version is one chart version of a Repo.
type Version struct {
	Chart Chart
	// Archive is served at the version's URL (Chart.Archive by default).
	Archive []byte
	// Digest is what the index says of the archive: its SHA-256 by
	// default; "-" says none.
	Digest string
	// URL is what the index lists: "NAME-VERSION.tgz" (relative) by
	// default; Absolute makes it the archive's absolute URL.
	URL      string
	Absolute bool
	// Prov, when set, is served beside the archive as its provenance
	// file (the archive's path and ".prov"), as `helm package --sign`
	// leaves it.
	Prov []byte
}

// NewRepo starts an empty chart repository.
func NewRepo(t testing.TB) *Repo {
	t.Helper()
	r := &Repo{versions: map[string][]*Version{}, archives: map[string][]byte{}}
	r.server = newServer(t, http.HandlerFunc(r.serve))
	r.URL = r.srv.URL + "/charts"
	return r
}

// Add publishes a chart version built from c and returns it.
func (r *Repo) Add(t testing.TB, c Chart) *Version {
	t.Helper()
	return r.AddVersion(t, Version{Chart: c})
}

// AddVersion publishes v, filling in its defaults.
func (r *Repo) AddVersion(t testing.TB, v Version) *Version {
	t.Helper()
	if v.Archive == nil {
		v.Archive = v.Chart.Archive(t)
	}
	switch v.Digest {
	case "":
		v.Digest = Digest(v.Archive)
	case "-":
		v.Digest = ""
	}
	file := v.Chart.ArchiveName()
	if v.URL == "" {
		v.URL = file
	}
	if v.Absolute {
		v.URL = r.URL + "/" + file
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.archives["/charts/"+file] = v.Archive
	delete(r.archives, "/charts/"+file+".prov")
	if v.Prov != nil {
		r.archives["/charts/"+file+".prov"] = v.Prov
	}
	vs := slices.DeleteFunc(r.versions[v.Chart.Name], func(o *Version) bool { return o.Chart.Version == v.Chart.Version })
	r.versions[v.Chart.Name] = append(vs, &v)
	return &v
}

// AddSigned publishes a chart version built from c with the provenance
// file sign makes of its Chart.yaml, archive name and archive (such as
// verifytest's PGPKey.SignProv).
func (r *Repo) AddSigned(t testing.TB, c Chart, sign func(t testing.TB, chartYAML, file string, archive []byte) []byte) *Version {
	t.Helper()
	archive := c.Archive(t)
	return r.AddVersion(t, Version{Chart: c, Archive: archive, Prov: sign(t, c.ChartYAMLText(t), c.ArchiveName(), archive)})
}

// Remove takes a chart (every version) out of the index.
func (r *Repo) Remove(chart string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.versions, chart)
}

// SetIndex serves body as the index instead of the built one; "" goes
// back to the built one.
func (r *Repo) SetIndex(body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if body == "" {
		r.index = nil
	} else {
		r.index = &body
	}
}

// Index is the index.yaml the repository serves now.
func (r *Repo) Index(t testing.TB) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.index != nil {
		return *r.index
	}
	entries := map[string][]map[string]any{}
	for name, vs := range r.versions {
		for _, v := range vs {
			m := v.Chart.metadata()
			m["urls"] = []string{v.URL}
			m["created"] = "2026-01-02T03:04:05Z"
			if v.Digest != "" {
				m["digest"] = v.Digest
			}
			entries[name] = append(entries[name], m)
		}
	}
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "entries": entries, "generated": "2026-01-02T03:04:05Z"})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (r *Repo) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/charts/index.yaml" {
		body := r.Index(panicker{})
		etag := `"` + Digest([]byte(body))[:16] + `"`
		if req.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Type", "application/x-yaml")
		io.WriteString(w, body)
		return
	}
	r.mu.Lock()
	archive, ok := r.archives[req.URL.Path]
	r.mu.Unlock()
	if !ok {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	if strings.HasSuffix(req.URL.Path, ".prov") {
		w.Header().Set("Content-Type", "application/pgp-signature")
	}
	w.Write(archive)
}

// Source is a helm source of the repository; cfg's URL is set.
func (r *Repo) Source(t testing.TB, cfg registry.HelmConfig) *registry.Helm {
	t.Helper()
	cfg.URL = r.URL
	src, err := registry.NewHelm(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// IsIndex and IsArchive match the repository's requests for Count.
func IsIndex(_, path string) bool   { return strings.HasSuffix(path, "/index.yaml") }
func IsArchive(_, path string) bool { return strings.HasSuffix(path, ".tgz") }

// IsProvenance matches the requests for a chart's provenance file.
func IsProvenance(_, path string) bool { return strings.HasSuffix(path, ".tgz.prov") }

// Registry is an in-process OCI registry (go-containerregistry's) that
// charts are pushed to as `helm push` pushes them.
type Registry struct {
	*server
	// Host is the registry's host:port.
	Host string
}

// NewRegistry starts an empty registry.
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{server: newServer(t, ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0))))}
	r.Host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// Push pushes c to repository repo, tagged with its version ("+" written
// "_"), and returns the manifest digest.
func (r *Registry) Push(t testing.TB, repo string, c Chart) string {
	t.Helper()
	return PushChart(t, r.Host, repo, c)
}

// PushChart pushes c to repository repo of the registry at host (plain
// HTTP) as Registry.Push does: for registries of other packages (an
// Artifact Registry stand-in).
func PushChart(t testing.TB, host, repo string, c Chart) string {
	t.Helper()
	config, err := json.Marshal(c.metadata())
	if err != nil {
		t.Fatal(err)
	}
	return pushArtifact(t, host, repo, strings.ReplaceAll(c.Version, "+", "_"), config, c.Archive(t))
}

// PushArtifact pushes a chart manifest of a config blob and an archive
// (either may be anything) as repo:tag, and returns its digest: an OCI
// image manifest whose config and one layer have Helm's media types.
func (r *Registry) PushArtifact(t testing.TB, repo, tag string, config, archive []byte) string {
	t.Helper()
	return pushArtifact(t, r.Host, repo, tag, config, archive)
}

func pushArtifact(t testing.TB, host, repo, tag string, config, archive []byte) string {
	t.Helper()
	ref, err := name.NewTag(host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	cfgLayer := static.NewLayer(config, registry.HelmConfigMediaType)
	content := static.NewLayer(archive, registry.HelmContentMediaType)
	var descs []v1.Descriptor
	for _, l := range []v1.Layer{cfgLayer, content} {
		if err := remote.WriteLayer(ref.Context(), l); err != nil {
			t.Fatalf("push blob to %s: %v", repo, err)
		}
		d, _ := l.Digest()
		size, _ := l.Size()
		mt, _ := l.MediaType()
		descs = append(descs, v1.Descriptor{MediaType: mt, Size: size, Digest: d})
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: descs[0], Layers: descs[1:]}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(ref, rawManifest(raw)); err != nil {
		t.Fatalf("push manifest %s: %v", ref, err)
	}
	return "sha256:" + Digest(raw)
}

// PushImage pushes an (empty) image as repo:tag: registries hold other
// things than charts.
func (r *Registry) PushImage(t testing.TB, repo, tag string) {
	t.Helper()
	ref, err := name.NewTag(r.Host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, empty.Image); err != nil {
		t.Fatal(err)
	}
}

// Delete deletes repo:tag.
func (r *Registry) Delete(t testing.TB, repo, tag string) {
	t.Helper()
	ref, err := name.NewTag(r.Host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(ref); err != nil {
		t.Fatal(err)
	}
}

// rawManifest is an OCI image manifest as it is.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// Source is a helm source of the registry (plain HTTP, retries fast);
// cfg's Host is set.
func (r *Registry) Source(t testing.TB, cfg registry.HelmConfig) *registry.Helm {
	t.Helper()
	cfg.Host, cfg.Insecure = r.Host, true
	cfg.Backoff = remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 2}
	src, err := registry.NewHelm(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// IsManifest and IsBlob match the registry's requests for Count.
func IsManifest(_, path string) bool { return strings.Contains(path, "/manifests/") }
func IsBlob(_, path string) bool     { return strings.Contains(path, "/blobs/") }

// panicker is a testing.TB for building the index inside a handler,
// where a failure is a bug of this package.
type panicker struct{ testing.TB }

func (panicker) Helper()                           {}
func (panicker) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (panicker) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

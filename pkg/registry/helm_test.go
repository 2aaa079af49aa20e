package registry_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/helmtest"
	"github.com/specsync/specsync/pkg/spec"
)

// chart is a valid chart with a description.
func chart(name, version string) helmtest.Chart {
	return helmtest.Chart{Name: name, Version: version, Description: "the " + name + " chart"}
}

// valuesSchema is a values.schema.json as chart authors write them
// (draft-07, required and defaults).
const valuesSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "required": ["replicas"],
  "properties": {
    "replicas": {"type": "integer", "minimum": 1, "default": 1},
    "image": {
      "type": "object",
      "required": ["tag"],
      "properties": {"tag": {"type": "string", "default": "latest"}, "default": {"type": "boolean"}}
    },
    "ratio": {"type": "number", "exclusiveMinimum": 0},
    "extra": true
  },
  "additionalProperties": false
}`

func entryErr(t *testing.T, l *registry.Listing, name string) string {
	t.Helper()
	e, ok := byName(l)[name]
	if !ok {
		t.Fatalf("no entry %s among %v", name, names(l))
	}
	if e.Err == nil {
		t.Fatalf("%s: no error (spec %+v)", name, e.Spec)
	}
	if e.Spec != nil {
		t.Errorf("%s: an entry with an error has a spec", name)
	}
	return e.Err.Error()
}

func entrySpec(t *testing.T, l *registry.Listing, name string) *spec.Spec {
	t.Helper()
	e, ok := byName(l)[name]
	if !ok {
		t.Fatalf("no entry %s among %v", name, names(l))
	}
	if e.Err != nil || e.Spec == nil {
		t.Fatalf("%s: error %v", name, e.Err)
	}
	return e.Spec
}

// Each chart is one entry: its highest release version, mapped to a spec.
// A newer prerelease, a deprecated chart and a library chart are passed
// over; relative and absolute chart URLs both work.
func TestHelmRepositoryCharts(t *testing.T) {
	t.Parallel()
	repo := helmtest.NewRepo(t)
	db := chart("postgresql", "1.2.3")
	db.AppVersion, db.Home, db.Icon = "16.4", "https://example.com/pg", "https://example.com/pg.png"
	db.Keywords = []string{"database", "sql", " ", "database"}
	db.Schema = valuesSchema
	repo.Add(t, chart("postgresql", "1.2.2"))
	repo.Add(t, chart("postgresql", "1.10.0-rc.1")) // newer, a prerelease
	repo.Add(t, db)
	repo.Add(t, chart("postgresql", "not-a-version"))
	repo.AddVersion(t, helmtest.Version{Chart: chart("redis", "2.0.0+build.7"), Absolute: true})
	repo.Add(t, chart("redis", "2.0.0-beta"))
	old := chart("retired", "3.0.0")
	old.Deprecated = true
	repo.Add(t, chart("retired", "2.0.0"))
	repo.Add(t, old)
	lib := chart("common", "1.0.0")
	lib.Type = "library"
	repo.Add(t, lib)
	repo.Add(t, chart("early", "0.1.0-alpha.1"))
	plans := chart("mq", "0.3.0")
	plans.Annotations = map[string]string{
		registry.BindableAnnotation: "true",
		registry.PlansAnnotation:    "- name: small\n  description: One broker\n  free: true\n- name: large\n  description: Three brokers\n  free: false\n  metadata: {replicas: 3}\n",
	}
	repo.Add(t, plans)

	l := fetch(t, repo.Source(t, registry.HelmConfig{}))
	if got := names(l); !slices.Equal(got, []string{"mq", "postgresql", "redis"}) {
		t.Fatalf("entries %v", got)
	}
	pg := entrySpec(t, l, "postgresql")
	if pg.Name != "postgresql" || pg.Description != "the postgresql chart" || pg.MaintenanceVersion != "1.2.3" || pg.Bindable {
		t.Errorf("postgresql: %+v", pg)
	}
	if !slices.Equal(pg.Tags, []string{"database", "sql"}) {
		t.Errorf("tags %q", pg.Tags)
	}
	md, _ := json.Marshal(pg.Metadata)
	if want := `{"displayName":"postgresql","documentationUrl":"https://example.com/pg","helm":{"appVersion":"16.4","chart":"postgresql","repository":"` +
		repo.URL + `","version":"1.2.3"},"imageUrl":"https://example.com/pg.png"}`; string(md) != want {
		t.Errorf("metadata %s\nwant     %s", md, want)
	}
	if len(pg.Plans) != 1 || pg.Plans[0].Name != registry.DefaultChartPlan {
		t.Fatalf("plans %+v", pg.Plans)
	}
	if ref := byName(l)["postgresql"].Ref; !strings.HasPrefix(ref, repo.URL+"/postgresql-1.2.3.tgz@sha256:") {
		t.Errorf("ref %s", ref)
	}
	// The values schema: draft-04, no required anywhere, the update
	// schema without defaults; a property named "default" stays.
	sc := pg.Plans[0].Schemas
	prov, _ := json.Marshal(sc.Provision)
	upd, _ := json.Marshal(sc.Update)
	for what, want := range map[string]bool{
		`"$schema":"http://json-schema.org/draft-04/schema#"`: true,
		`"required"`: false,
		`"ratio":{"exclusiveMinimum":true,"minimum":0`: true,
		`"extra":{}`: true,
		`"tag":{"default":"latest","type":"string"}`:            true,
		`"default":{"type":"boolean"}`:                          true,
		`"replicas":{"default":1,"minimum":1,"type":"integer"}`: true,
		`"additionalProperties":false`:                          true,
	} {
		if strings.Contains(string(prov), what) != want {
			t.Errorf("provision schema has %s: %v, want %v\n%s", what, !want, want, prov)
		}
	}
	if strings.Contains(string(upd), `"default":1`) || strings.Contains(string(upd), `"required"`) || !strings.Contains(string(upd), `"default":{"type":"boolean"}`) {
		t.Errorf("update schema %s", upd)
	}

	redis := entrySpec(t, l, "redis")
	if redis.MaintenanceVersion != "2.0.0+build.7" {
		t.Errorf("redis version %s", redis.MaintenanceVersion)
	}
	if ref := byName(l)["redis"].Ref; !strings.HasPrefix(ref, repo.URL+"/redis-2.0.0+build.7.tgz@") {
		t.Errorf("absolute URL: ref %s", ref)
	}
	mq := entrySpec(t, l, "mq")
	if !mq.Bindable || len(mq.Plans) != 2 || mq.Plans[0].Name != "small" || *mq.Plans[1].Free || mq.Plans[1].Metadata["replicas"] != 3.0 {
		t.Errorf("mq: bindable %v plans %+v", mq.Bindable, mq.Plans)
	}

	// With prereleases, the newer prerelease is the one offered, and a
	// chart with only prereleases offers one.
	l = fetch(t, repo.Source(t, registry.HelmConfig{Prereleases: true}))
	if got := names(l); !slices.Equal(got, []string{"early", "mq", "postgresql", "redis"}) {
		t.Fatalf("with prereleases: entries %v", got)
	}
	if v := entrySpec(t, l, "postgresql").MaintenanceVersion; v != "1.10.0-rc.1" {
		t.Errorf("with prereleases: postgresql %s", v)
	}
	if v := entrySpec(t, l, "redis").MaintenanceVersion; v != "2.0.0+build.7" {
		t.Errorf("with prereleases: redis %s (a release beats its own prerelease)", v)
	}
}

// The index is fetched with the ETag of the last fetch: a 304 is an
// unchanged listing and downloads nothing. A warm source downloads only
// the archives of versions it has not read.
func TestHelmRepositoryETagAndCache(t *testing.T) {
	t.Parallel()
	repo := helmtest.NewRepo(t)
	repo.Add(t, chart("alpha", "1.0.0"))
	repo.Add(t, chart("beta", "1.0.0"))
	src := repo.Source(t, registry.HelmConfig{})
	first := fetch(t, src)
	if first.ETag == "" || repo.Count(helmtest.IsArchive) != 2 {
		t.Fatalf("first fetch: etag %q, %d archives", first.ETag, repo.Count(helmtest.IsArchive))
	}

	repo.Reset()
	second, err := src.Fetch(context.Background(), registry.FetchOptions{ETag: first.ETag, PreviousDigest: first.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if !second.NotModified || second.Digest != first.Digest || len(second.Entries) != 0 || repo.Count(helmtest.IsArchive) != 0 {
		t.Fatalf("304: %+v, requests %v", second, repo.Requests())
	}

	// A new version of beta: the index changes, only beta's new archive
	// is downloaded.
	repo.Add(t, chart("beta", "1.1.0"))
	repo.Reset()
	third, err := src.Fetch(context.Background(), registry.FetchOptions{ETag: first.ETag, PreviousDigest: first.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if third.NotModified || third.ETag == first.ETag || third.Digest == first.Digest {
		t.Fatalf("changed index: %+v", third)
	}
	if got := repo.Requests(); !slices.Equal(got, []string{"GET /charts/index.yaml", "GET /charts/beta-1.1.0.tgz"}) {
		t.Fatalf("requests of a warm fetch: %v", got)
	}
	if v := entrySpec(t, third, "beta").MaintenanceVersion; v != "1.1.0" {
		t.Errorf("beta %s", v)
	}

	// A fresh source (a cold instance) downloads everything again.
	repo.Reset()
	fetch(t, repo.Source(t, registry.HelmConfig{}))
	if n := repo.Count(helmtest.IsArchive); n != 2 {
		t.Errorf("cold source downloaded %d archives, want 2", n)
	}
}

// An index that cannot be read whole fails the fetch: nothing is a
// listing, so nothing can be marked.
func TestHelmRepositoryIndexFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		what  string
		fault func(repo *helmtest.Repo) func(w http.ResponseWriter, r *http.Request) bool
		index string
		cfg   registry.HelmConfig
		want  string
	}{
		{what: "500", want: "500", fault: status(http.StatusInternalServerError)},
		{what: "401", want: "401", fault: status(http.StatusUnauthorized)},
		{what: "404", want: "404", fault: status(http.StatusNotFound)},
		{what: "truncated", want: "unexpected EOF", fault: func(repo *helmtest.Repo) func(w http.ResponseWriter, r *http.Request) bool {
			return onIndex(func(w http.ResponseWriter, r *http.Request) {
				body := repo.Index(t)
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					panic(err)
				}
				defer conn.Close()
				fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:len(body)/2])
				buf.Flush()
			})
		}},
		{what: "garbage", want: "not a chart repository index", index: "<html><body>Sign in</body></html>"},
		{what: "a list", want: "not a chart repository index", index: "- a\n- b\n"},
		{what: "no apiVersion", want: "it has no apiVersion", index: "entries: {}\n"},
		{what: "oversized", want: "more than the 200", cfg: registry.HelmConfig{MaxIndexBytes: 200}},
		{what: "oversized, chunked", want: "more than the 200", cfg: registry.HelmConfig{MaxIndexBytes: 200},
			fault: func(repo *helmtest.Repo) func(w http.ResponseWriter, r *http.Request) bool {
				return onIndex(func(w http.ResponseWriter, r *http.Request) {
					for _, line := range strings.SplitAfter(repo.Index(t), "\n") {
						fmt.Fprint(w, line)
						w.(http.Flusher).Flush()
					}
				})
			}},
		{what: "slow", want: "within 200ms", cfg: registry.HelmConfig{Timeout: 200 * time.Millisecond},
			fault: func(repo *helmtest.Repo) func(w http.ResponseWriter, r *http.Request) bool {
				return onIndex(func(w http.ResponseWriter, r *http.Request) {
					fmt.Fprint(w, "apiVersion: v1\n")
					w.(http.Flusher).Flush()
					select {
					case <-r.Context().Done():
					case <-time.After(10 * time.Second):
					}
				})
			}},
		{what: "an archive too slow", want: "within 200ms", cfg: registry.HelmConfig{Timeout: 200 * time.Millisecond},
			fault: func(repo *helmtest.Repo) func(w http.ResponseWriter, r *http.Request) bool {
				return func(w http.ResponseWriter, r *http.Request) bool {
					if !strings.HasSuffix(r.URL.Path, "beta-1.0.0.tgz") {
						return false
					}
					select {
					case <-r.Context().Done():
					case <-time.After(10 * time.Second):
					}
					return true
				}
			}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			repo := helmtest.NewRepo(t)
			repo.Add(t, chart("alpha", "1.0.0"))
			repo.Add(t, chart("beta", "1.0.0"))
			if tc.fault != nil {
				repo.SetFault(tc.fault(repo))
			}
			if tc.index != "" {
				repo.SetIndex(tc.index)
			}
			fetchFails(t, repo.Source(t, tc.cfg), tc.want, "chart repository "+repo.URL)
		})
	}
}

func status(code int) func(repo *helmtest.Repo) func(w http.ResponseWriter, r *http.Request) bool {
	return func(*helmtest.Repo) func(w http.ResponseWriter, r *http.Request) bool {
		return onIndex(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "injected", code) })
	}
}

func onIndex(f func(w http.ResponseWriter, r *http.Request)) func(w http.ResponseWriter, r *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !helmtest.IsIndex(r.Method, r.URL.Path) {
			return false
		}
		f(w, r)
		return true
	}
}

// A chart whose archive, Chart.yaml, schema or annotations are broken is
// that entry's error, with the reason; the other charts are served. A
// listing with an entry error carries no ETag, so the next run reads the
// index again and retries the chart.
func TestHelmRepositoryBrokenCharts(t *testing.T) {
	t.Parallel()
	named := func(c helmtest.Chart) helmtest.Chart {
		c.Name, c.Version, c.Description = "bad", "1.0.0", "broken"
		return c
	}
	files := func(t *testing.T, fs ...helmtest.File) []byte { return helmtest.TarGz(t, fs...) }
	chartYAML := helmtest.File{Name: "bad/Chart.yaml", Body: "apiVersion: v2\nname: bad\nversion: 1.0.0\n"}
	for _, tc := range []struct {
		what    string
		version func(t *testing.T) helmtest.Version
		cfg     registry.HelmConfig
		fault   func(w http.ResponseWriter, r *http.Request) bool
		want    string
	}{
		{what: "not gzip", want: "not a gzip file", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{}), Archive: []byte("PK\x03\x04 a zip file")}
		}},
		{what: "gzip of garbage", want: "not a tar file", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{}), Archive: gzipped(t, "this is no tar file at all")}
		}},
		{what: "truncated archive", want: "unexpected EOF", version: func(t *testing.T) helmtest.Version {
			a := named(helmtest.Chart{}).Archive(t)
			return helmtest.Version{Chart: named(helmtest.Chart{}), Archive: a[:len(a)-12], Digest: "-"}
		}},
		{what: "digest mismatch", want: "the index says sha256:" + strings.Repeat("ab", 32), version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{}), Digest: strings.Repeat("ab", 32)}
		}},
		{what: "digest not a SHA-256", want: "is not a SHA-256", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{}), Digest: "md5:abc"}
		}},
		{what: "missing Chart.yaml", want: "no Chart.yaml", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{ChartYAML: "-"})}
		}},
		{what: "Chart.yaml not YAML", want: "Chart.yaml", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{ChartYAML: "name: [bad\n"})}
		}},
		{what: "Chart.yaml of another chart", want: `the archive holds chart "other"`, version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{ChartYAML: "apiVersion: v2\nname: other\nversion: 1.0.0\n"})}
		}},
		{what: "Chart.yaml of another version", want: `Chart.yaml says version "0.9.0"`, version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{ChartYAML: "apiVersion: v2\nname: bad\nversion: 0.9.0\n"})}
		}},
		{what: "schema not JSON", want: "values.schema.json is not JSON", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{Schema: "{not json"})}
		}},
		{what: "schema not draft-04", want: "const at /properties/mode is a keyword of a later draft", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{Schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"mode":{"const":"fast"}}}`})}
		}},
		{what: "schema invalid draft-04", want: "does not compile as JSON Schema draft-04", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{Schema: `{"properties":{"n":{"type":"integr"}}}`})}
		}},
		{what: "schema with a remote $ref", want: "does not compile", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{Schema: `{"properties":{"n":{"$ref":"https://example.com/s.json"}}}`})}
		}},
		{what: "schema not of an object", want: "the schema's type must be \"object\"", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{Schema: `{"type":"array"}`})}
		}},
		{what: "schema too big to serve", want: "OSB allows at most 64000", version: func(t *testing.T) helmtest.Version {
			props := map[string]any{}
			for i := range 2000 {
				props[fmt.Sprintf("p%04d", i)] = map[string]any{"type": "string", "description": "a property"}
			}
			b, _ := json.Marshal(map[string]any{"properties": props})
			return helmtest.Version{Chart: named(helmtest.Chart{Schema: string(b)})}
		}},
		{what: "plans annotation not a list", want: "annotation specsync.io/plans: want a list of plans", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{Annotations: map[string]string{registry.PlansAnnotation: "small: one node\n"}})}
		}},
		{what: "plans annotation with an unknown field", want: `unknown field "price"`, version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{Annotations: map[string]string{registry.PlansAnnotation: "- {name: a, description: b, price: 3}\n"}})}
		}},
		{what: "plans annotation invalid plan", want: "plans[0].description: must not be empty", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{Annotations: map[string]string{registry.PlansAnnotation: "- name: a\n"}})}
		}},
		{what: "bindable annotation", want: `"yes" is not true or false`, version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{Annotations: map[string]string{registry.BindableAnnotation: "yes"}})}
		}},
		{what: "plan name not an OSB name", want: `invalid spec: plans[0].name: "a b" must be`, version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{ChartYAML: "apiVersion: v2\nname: bad\nversion: 1.0.0\nannotations: {specsync.io/plans: '- {name: \"a b\", description: c}'}\n"})}
		}},
		{what: "oversized archive", want: "the archive is more than the 1024 bytes allowed", cfg: registry.HelmConfig{MaxChartBytes: 1024},
			version: func(t *testing.T) helmtest.Version {
				return helmtest.Version{Chart: named(helmtest.Chart{Files: map[string]string{"README.md": randomText(4096)}})}
			}},
		{what: "unpacks too big", want: "unpacks to more than the 65536 bytes allowed", cfg: registry.HelmConfig{MaxChartUnpackedBytes: 64 << 10},
			version: func(t *testing.T) helmtest.Version {
				return helmtest.Version{Chart: named(helmtest.Chart{Files: map[string]string{"zeros": strings.Repeat("\x00", 1<<20)}})}
			}},
		{what: "path traversal", want: "a path out of the chart", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{}), Archive: files(t, chartYAML, helmtest.File{Name: "bad/../../etc/passwd", Body: "x"})}
		}},
		{what: "absolute path", want: "an absolute path", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{}), Archive: files(t, helmtest.File{Name: "/bad/Chart.yaml", Body: chartYAML.Body})}
		}},
		{what: "symlink", want: "a link", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{}), Archive: files(t, chartYAML,
				helmtest.File{Name: "bad/values.schema.json", Type: tar.TypeSymlink, Linkname: "/etc/passwd"})}
		}},
		{what: "two top directories", want: "a second top directory", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{}), Archive: files(t, chartYAML, helmtest.File{Name: "other/Chart.yaml", Body: "name: other\n"})}
		}},
		{what: "Chart.yaml twice", want: "Chart.yaml is in the archive twice", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{}), Archive: files(t, chartYAML, helmtest.File{Name: "bad/./Chart.yaml", Body: chartYAML.Body})}
		}},
		{what: "no semver version", want: `none of its 1 versions ("latest")`, version: func(t *testing.T) helmtest.Version {
			c := named(helmtest.Chart{})
			c.Version = "latest"
			return helmtest.Version{Chart: c}
		}},
		{what: "archive 404", want: "404", fault: func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasSuffix(r.URL.Path, "/bad-1.0.0.tgz") {
				http.NotFound(w, r)
				return true
			}
			return false
		}, version: func(t *testing.T) helmtest.Version { return helmtest.Version{Chart: named(helmtest.Chart{})} }},
		{what: "archive on another host", want: "connection refused", version: func(t *testing.T) helmtest.Version {
			return helmtest.Version{Chart: named(helmtest.Chart{}), URL: "http://127.0.0.1:1/bad-1.0.0.tgz?token=s3cret"}
		}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			repo := helmtest.NewRepo(t)
			repo.Add(t, chart("good", "1.0.0"))
			repo.AddVersion(t, tc.version(t))
			repo.SetFault(tc.fault)
			l := fetch(t, repo.Source(t, tc.cfg))
			msg := entryErr(t, l, "bad")
			t.Logf("entry error: %s", msg)
			if !strings.Contains(msg, tc.want) || !strings.HasPrefix(msg, "chart bad") {
				t.Errorf("error %q does not say %q", msg, tc.want)
			}
			if strings.Contains(msg, "s3cret") || strings.Contains(byName(l)["bad"].Ref, "s3cret") {
				t.Errorf("a URL's query made it into the error or ref: %q %q", msg, byName(l)["bad"].Ref)
			}
			entrySpec(t, l, "good")
			if l.ETag != "" {
				t.Errorf("a listing with an entry error has ETag %q", l.ETag)
			}
		})
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write([]byte(s))
	w.Close()
	return buf.Bytes()
}

// randomText is text gzip cannot shrink much.
func randomText(n int) string {
	var b strings.Builder
	x := uint32(2463534242)
	for b.Len() < n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteByte(byte('a' + x%26))
	}
	return b.String()
}

// A broken archive is cached by its digest: a warm source does not
// download it again, and still reports it.
func TestHelmRepositoryBrokenChartCached(t *testing.T) {
	t.Parallel()
	repo := helmtest.NewRepo(t)
	repo.Add(t, chart("good", "1.0.0"))
	repo.AddVersion(t, helmtest.Version{Chart: chart("bad", "1.0.0"), Archive: []byte("not an archive")})
	src := repo.Source(t, registry.HelmConfig{})
	first := fetch(t, src)
	repo.Reset()
	second := fetch(t, src)
	if n := repo.Count(helmtest.IsArchive); n != 0 {
		t.Fatalf("the warm fetch downloaded %d archives: %v", n, repo.Requests())
	}
	if first.Digest != second.Digest || entryErr(t, second, "bad") != entryErr(t, first, "bad") {
		t.Fatalf("warm fetch differs: %v / %v", entryErr(t, second, "bad"), entryErr(t, first, "bad"))
	}
}

// A chart gone from the index is gone from the listing (the reconcile
// marks it); back, it is listed again.
func TestHelmRepositoryChartGoneAndBack(t *testing.T) {
	t.Parallel()
	repo := helmtest.NewRepo(t)
	repo.Add(t, chart("alpha", "1.0.0"))
	repo.Add(t, chart("beta", "1.0.0"))
	src := repo.Source(t, registry.HelmConfig{})
	first := fetch(t, src)
	repo.Remove("beta")
	if got := names(fetch(t, src)); !slices.Equal(got, []string{"alpha"}) {
		t.Fatalf("beta gone: %v", got)
	}
	repo.Add(t, chart("beta", "1.0.0"))
	back := fetch(t, src)
	if !slices.Equal(names(back), []string{"alpha", "beta"}) || back.Digest != first.Digest {
		t.Fatalf("beta back: %v, same digest %v", names(back), back.Digest == first.Digest)
	}
	// Allow and deny match chart names.
	l := fetch(t, repo.Source(t, registry.HelmConfig{Filter: mustFilter(t, nil, []string{"b.*"})}))
	if got := names(l); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("deny b.*: %v", got)
	}
}

// Credentials go to the index and to archives of the repository's own
// host, never to archives elsewhere; a refusal fails the fetch without
// showing the secret.
func TestHelmRepositoryAuth(t *testing.T) {
	const password = "pw-helm-canary-0123"
	t.Setenv("SPECSYNC_HELM_PW", password)
	auth := registry.Auth{Type: "basic", Username: "bob", PasswordEnv: "SPECSYNC_HELM_PW"}
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth("bob", password)
	want := req.Header.Get("Authorization")

	elsewhere := map[string]string{}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere[r.URL.Path] = r.Header.Get("Authorization")
		w.Write(chart("far", "1.0.0").Archive(t))
	}))
	t.Cleanup(other.Close)

	repo := helmtest.NewRepo(t)
	repo.Add(t, chart("near", "1.0.0"))
	repo.AddVersion(t, helmtest.Version{Chart: chart("far", "1.0.0"), URL: other.URL + "/far-1.0.0.tgz", Digest: "-"})
	var seen []string
	repo.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != want {
			http.Error(w, "refused: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
			return true
		}
		return false
	})
	l := fetch(t, repo.Source(t, registry.HelmConfig{Auth: auth}))
	entrySpec(t, l, "near")
	entrySpec(t, l, "far")
	if !slices.Equal(seen, []string{"/charts/index.yaml " + want, "/charts/near-1.0.0.tgz " + want}) {
		t.Errorf("repository requests %q", seen)
	}
	if got := elsewhere["/far-1.0.0.tgz"]; got != "" {
		t.Errorf("the archive on another host got credentials %q", got)
	}

	// Wrong password: the index is refused (401), and the error, which
	// echoes the header, shows neither it nor the password.
	t.Setenv("SPECSYNC_HELM_PW", password+"-wrong")
	err := fetchFails(t, repo.Source(t, registry.HelmConfig{Auth: auth}), "401")
	if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), "Basic ") && !strings.Contains(err.Error(), "[REDACTED]") {
		t.Errorf("error shows a secret: %v", err)
	}
	fetchFails(t, repo.Source(t, registry.HelmConfig{Auth: registry.Auth{Type: "token", TokenEnv: "SPECSYNC_HELM_NOPE"}}), "SPECSYNC_HELM_NOPE")
}

func TestNewHelmValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []registry.HelmConfig{
		{},
		{URL: "https://charts.example.com", Host: "registry.example.com"},
		{URL: "oci://registry.example.com/charts"},
		{URL: "/relative"},
		{URL: "https://user:pw@charts.example.com"},
		{URL: "https://charts.example.com", Prefix: "x"},
		{URL: "https://charts.example.com", Repositories: []string{"x"}},
		{URL: "https://charts.example.com", Timeout: -1},
		{URL: "https://charts.example.com", MaxChartBytes: -1},
		{URL: "https://charts.example.com", Auth: registry.Auth{Type: "token"}},
		{Host: "https://registry.example.com"},
		{Host: "registry.example.com/charts"},
		{Host: "registry.example.com", Prefix: "a//b"},
		{Host: "registry.example.com", Repositories: []string{"a", "a"}},
		{Host: "registry.example.com", Repositories: []string{"UPPER"}},
		{Host: "registry.example.com", MaxIndexBytes: 10},
	} {
		if _, err := registry.NewHelm(cfg); err == nil {
			t.Errorf("NewHelm(%+v) succeeded", cfg)
		}
	}
	src, err := registry.NewHelm(registry.HelmConfig{URL: "https://charts.example.com/stable?sig=s3cret"})
	if err != nil || strings.Contains(src.String(), "s3cret") || !strings.Contains(src.String(), "https://charts.example.com/stable") {
		t.Errorf("String() %v %v", src, err)
	}
}

// Charts in an OCI registry: one repository per chart, versions as tags
// ("+" written "_"); an image repository offers nothing; listed from the
// catalog under the prefix or named. A warm source reads no blob of an
// unchanged chart again.
func TestHelmOCICharts(t *testing.T) {
	t.Parallel()
	reg := helmtest.NewRegistry(t)
	db := chart("postgresql", "1.2.3+build.1")
	db.Schema = valuesSchema
	reg.Push(t, "team/charts/postgresql", chart("postgresql", "1.2.2"))
	reg.Push(t, "team/charts/postgresql", db)
	reg.Push(t, "team/charts/postgresql", chart("postgresql", "1.3.0-rc.1"))
	reg.PushImage(t, "team/charts/postgresql", "latest")
	reg.Push(t, "team/charts/redis", chart("redis", "7.0.0"))
	reg.PushImage(t, "team/charts/app", "1.0.0")    // an image tagged like a version
	reg.PushImage(t, "team/charts/tools", "latest") // no version at all
	reg.Push(t, "other/redis", chart("redis", "9.0.0"))

	src := reg.Source(t, registry.HelmConfig{Prefix: "team/charts"})
	l := fetch(t, src)
	if got := names(l); !slices.Equal(got, []string{"postgresql", "redis"}) {
		t.Fatalf("entries %v", got)
	}
	pg := entrySpec(t, l, "postgresql")
	if pg.MaintenanceVersion != "1.2.3+build.1" || pg.Plans[0].Schemas.Provision == nil {
		t.Errorf("postgresql: version %s, schemas %+v", pg.MaintenanceVersion, pg.Plans[0].Schemas)
	}
	if repo := pg.Metadata["helm"].(map[string]any)["repository"]; repo != "oci://"+reg.Host+"/team/charts/postgresql" {
		t.Errorf("repository %v", repo)
	}
	if ref := byName(l)["postgresql"].Ref; !strings.HasPrefix(ref, reg.Host+"/team/charts/postgresql@sha256:") {
		t.Errorf("ref %s", ref)
	}

	reg.Reset()
	again := fetch(t, src)
	if n := reg.Count(helmtest.IsBlob); n != 0 || again.Digest != l.Digest {
		t.Fatalf("warm fetch read %d blobs: %v", n, reg.Requests())
	}

	// Named repositories, and prereleases.
	l = fetch(t, reg.Source(t, registry.HelmConfig{Prefix: "team/charts", Repositories: []string{"postgresql"}, Prereleases: true}))
	if got := names(l); !slices.Equal(got, []string{"postgresql"}) || entrySpec(t, l, "postgresql").MaintenanceVersion != "1.3.0-rc.1" {
		t.Fatalf("named, with prereleases: %v", got)
	}
	// Without a prefix, entries are whole repository paths.
	l = fetch(t, reg.Source(t, registry.HelmConfig{Filter: mustFilter(t, []string{"other/.*"}, nil)}))
	if got := names(l); !slices.Equal(got, []string{"other/redis"}) || entrySpec(t, l, "other/redis").MaintenanceVersion != "9.0.0" {
		t.Fatalf("no prefix: %v", got)
	}
}

// A broken chart in an OCI registry is its entry's error; a registry that
// fails every repository fails the fetch.
func TestHelmOCIFaults(t *testing.T) {
	t.Parallel()
	reg := helmtest.NewRegistry(t)
	reg.Push(t, "charts/good", chart("good", "1.0.0"))
	config, _ := json.Marshal(map[string]any{"apiVersion": "v2", "name": "broken", "version": "1.0.0"})
	reg.PushArtifact(t, "charts/broken", "1.0.0", config, []byte("not a gzip file"))
	reg.PushArtifact(t, "charts/liar", "2.0.0", config, chart("liar", "2.0.0").Archive(t))
	reg.Push(t, "charts/renamed", chart("other", "1.0.0"))
	src := reg.Source(t, registry.HelmConfig{Prefix: "charts"})
	l := fetch(t, src)
	entrySpec(t, l, "good")
	for name, want := range map[string]string{
		"broken":  "not a gzip file",
		"liar":    `config: chart "broken" version "1.0.0", not the version its tag says`,
		"renamed": `the archive holds chart "other", not "renamed"`,
	} {
		if msg := entryErr(t, l, name); !strings.Contains(msg, want) {
			t.Errorf("%s: %q does not say %q", name, msg, want)
		}
	}

	// One blob 500 (the registry's fault, not cached); then the registry
	// down for every repository.
	fresh := reg.Source(t, registry.HelmConfig{Prefix: "charts", Repositories: []string{"good", "broken"}})
	reg.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if helmtest.IsBlob(r.Method, r.URL.Path) && strings.Contains(r.URL.Path, "/good/") {
			http.Error(w, "injected", http.StatusInternalServerError)
			return true
		}
		return false
	})
	if msg := entryErr(t, fetch(t, fresh), "good"); !strings.Contains(msg, "500") {
		t.Errorf("blob 500: %s", msg)
	}
	reg.SetFault(nil)
	entrySpec(t, fetch(t, fresh), "good")

	reg.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "injected", http.StatusServiceUnavailable)
		return true
	})
	fetchFails(t, reg.Source(t, registry.HelmConfig{Prefix: "charts", Repositories: []string{"good", "broken"}}), "all 2 repositories failed", "503")
	fetchFails(t, reg.Source(t, registry.HelmConfig{Prefix: "charts"}), "catalog page 1", "503")
}

package emulator

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/specsync/specsync/pkg/spec"
)

func startRegistry(t *testing.T) *Registry {
	t.Helper()
	r, err := StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func ref(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func configOf(t *testing.T, img v1.Image) *v1.ConfigFile {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

func TestPushSpecImageSinglePlatform(t *testing.T) {
	t.Parallel()
	r := startRegistry(t)
	ctx := t.Context()
	label := base64.StdEncoding.EncodeToString([]byte("name: mysql\n"))

	for _, tc := range []struct {
		name      string
		platforms []spec.Platform
		want      spec.Platform
	}{
		{"default", nil, spec.Platform{OS: "linux", Architecture: "amd64"}},
		{"arm", []spec.Platform{{OS: "linux", Architecture: "arm", Variant: "v7"}}, spec.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			digest, err := PushSpecImage(ctx, r.Host(), "specs/"+tc.name, "v1", label, tc.platforms)
			if err != nil {
				t.Fatal(err)
			}
			desc, err := remote.Get(ref(t, r.Host()+"/specs/"+tc.name+":v1"), remote.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			if desc.MediaType != types.OCIManifestSchema1 {
				t.Errorf("media type = %s, want a single OCI manifest", desc.MediaType)
			}
			if desc.Digest.String() != digest {
				t.Errorf("tag points at %s, PushSpecImage returned %s", desc.Digest, digest)
			}
			img, err := remote.Image(ref(t, r.Host()+"/specs/"+tc.name+"@"+digest), remote.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			cf := configOf(t, img)
			if got := cf.Config.Labels[spec.LabelKey]; got != label {
				t.Errorf("label %s = %q, want %q", spec.LabelKey, got, label)
			}
			if got := (spec.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}); got != tc.want {
				t.Errorf("config platform = %v, want %v", got, tc.want)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Errorf("layers = %d (%v), want 1", len(layers), err)
			}
		})
	}

	// Equal inputs, equal digest; a changed label, a new one. Reconcile
	// tests rely on re-pushing an unchanged spec being a no-op.
	d1, err := PushSpecImage(ctx, r.Host(), "specs/det", "a", label, nil)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := PushSpecImage(ctx, r.Host(), "specs/det", "b", label, nil)
	if err != nil {
		t.Fatal(err)
	}
	d3, err := PushSpecImage(ctx, r.Host(), "specs/det", "c", label+"x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("same content pushed twice gave digests %s and %s", d1, d2)
	}
	if d1 == d3 {
		t.Errorf("different labels gave the same digest %s", d1)
	}
}

func TestPushSpecImageMultiPlatform(t *testing.T) {
	t.Parallel()
	r := startRegistry(t)
	ctx := t.Context()
	label := base64.StdEncoding.EncodeToString([]byte("name: redis\n"))
	platforms := []spec.Platform{
		{OS: "linux", Architecture: "amd64"},
		{OS: "linux", Architecture: "arm64", Variant: "v8"},
		{OS: "windows", Architecture: "amd64"},
	}
	digest, err := PushSpecImage(ctx, r.Host(), "specs/redis", "latest", label, platforms)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref(t, r.Host()+"/specs/redis:latest"), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if desc.MediaType != types.OCIImageIndex {
		t.Fatalf("media type = %s, want an OCI image index", desc.MediaType)
	}
	if desc.Digest.String() != digest {
		t.Errorf("tag points at %s, PushSpecImage returned %s", desc.Digest, digest)
	}
	idx, err := remote.Index(ref(t, r.Host()+"/specs/redis:latest"), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(platforms) {
		t.Fatalf("index has %d manifests, want %d", len(im.Manifests), len(platforms))
	}
	for i, m := range im.Manifests {
		if m.Platform == nil {
			t.Fatalf("manifest %d has no platform in the index", i)
		}
		got := spec.Platform{OS: m.Platform.OS, Architecture: m.Platform.Architecture, Variant: m.Platform.Variant}
		if got != platforms[i] {
			t.Errorf("index manifest %d platform = %v, want %v", i, got, platforms[i])
		}
		// Pulled by digest from the registry, not from the local index
		// value, to prove the children were pushed.
		img, err := remote.Image(ref(t, r.Host()+"/specs/redis@"+m.Digest.String()), remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		cf := configOf(t, img)
		if cf.Config.Labels[spec.LabelKey] != label {
			t.Errorf("child %d label = %q, want %q", i, cf.Config.Labels[spec.LabelKey], label)
		}
		if cfg := (spec.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}); cfg != platforms[i] {
			t.Errorf("child %d config platform = %v, want %v", i, cfg, platforms[i])
		}
	}

	// What a platform-aware client does: resolve the index to one image.
	img, err := remote.Image(ref(t, r.Host()+"/specs/redis:latest"), remote.WithContext(ctx),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}))
	if err != nil {
		t.Fatal(err)
	}
	if cf := configOf(t, img); cf.Architecture != "arm64" {
		t.Errorf("resolved image for linux/arm64/v8 has architecture %q", cf.Architecture)
	}
}

func TestPushImageWithLabels(t *testing.T) {
	t.Parallel()
	r := startRegistry(t)
	ctx := t.Context()
	for _, tc := range []struct {
		repo   string
		labels map[string]string
	}{
		{"plain/nolabel", nil},
		{"plain/broken", map[string]string{spec.LabelKey: "%%% not base64", "org.opencontainers.image.title": "broken"}},
	} {
		digest, err := PushImageWithLabels(ctx, r.Host(), tc.repo, "1.0", tc.labels)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(ref(t, r.Host()+"/"+tc.repo+"@"+digest), remote.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		cf := configOf(t, img)
		if len(cf.Config.Labels) != len(tc.labels) {
			t.Errorf("%s: labels = %v, want %v", tc.repo, cf.Config.Labels, tc.labels)
		}
		for k, v := range tc.labels {
			if cf.Config.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", tc.repo, k, cf.Config.Labels[k], v)
			}
		}
		if cf.OS != "linux" || cf.Architecture != "amd64" {
			t.Errorf("%s: platform %s/%s, want linux/amd64", tc.repo, cf.OS, cf.Architecture)
		}
	}
}

func TestSeedRegistry(t *testing.T) {
	t.Parallel()
	r := startRegistry(t)
	ctx := t.Context()
	files := fstest.MapFS{
		"specs/mysql.yaml":       {Data: []byte("name: mysql\nplans: [{name: small}]\n")},
		"specs/redis.yml":        {Data: []byte("name: redis\n")},
		"specs/pg.json":          {Data: []byte(`{"name":"pg"}`)},
		"specs/README.md":        {Data: []byte("not a spec")},
		"specs/nested/deep.yaml": {Data: []byte("name: deep\n")},
		"other/ignored.yaml":     {Data: []byte("name: ignored\n")},
	}
	repos, err := SeedRegistry(ctx, r.Host(), files, "specs")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"specs/mysql", "specs/pg", "specs/redis"}
	if !slices.Equal(repos, want) {
		t.Errorf("SeedRegistry returned %v, want %v", repos, want)
	}
	reg, err := name.NewRegistry(r.Host())
	if err != nil {
		t.Fatal(err)
	}
	catalog, err := remote.Catalog(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(catalog)
	if !slices.Equal(catalog, want) {
		t.Errorf("registry catalog = %v, want %v", catalog, want)
	}

	idx, err := remote.Index(ref(t, r.Host()+"/specs/mysql:latest"), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range im.Manifests {
		got = append(got, m.Platform.OS+"/"+m.Platform.Architecture)
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.StdEncoding.DecodeString(configOf(t, img).Config.Labels[spec.LabelKey])
		if err != nil {
			t.Fatalf("label is not base64: %v", err)
		}
		if string(raw) != string(files["specs/mysql.yaml"].Data) {
			t.Errorf("label decodes to %q, want the file content", raw)
		}
	}
	if !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("seeded platforms = %v", got)
	}
}

func TestSeedRegistryErrors(t *testing.T) {
	t.Parallel()
	r := startRegistry(t)
	ctx := t.Context()
	if _, err := SeedRegistry(ctx, r.Host(), fstest.MapFS{}, "missing"); err == nil {
		t.Error("SeedRegistry of a missing dir succeeded")
	}
	dup := fstest.MapFS{
		"d/a.json": {Data: []byte(`{}`)},
		"d/a.yaml": {Data: []byte("{}")},
	}
	if _, err := SeedRegistry(ctx, r.Host(), dup, "d"); err == nil || !strings.Contains(err.Error(), "both map to repository specs/a") {
		t.Errorf("SeedRegistry with clashing base names = %v", err)
	}
	bad := fstest.MapFS{"d/Not Valid.yaml": {Data: []byte("{}")}}
	if _, err := SeedRegistry(ctx, r.Host(), bad, "d"); err == nil || !strings.Contains(err.Error(), "Not Valid.yaml") {
		t.Errorf("SeedRegistry with an invalid repository name = %v", err)
	}
}

func TestRegistryClose(t *testing.T) {
	t.Parallel()
	r, err := StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + r.Host() + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/ = %d, want 200", resp.StatusCode)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get("http://" + r.Host() + "/v2/"); err == nil {
		resp.Body.Close()
		t.Errorf("registry still answers after Close: %d", resp.StatusCode)
	}
	if _, err := StartRegistry("not an address"); err == nil {
		t.Error("StartRegistry on a bad address succeeded")
	}
}

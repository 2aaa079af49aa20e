package registry_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
)

// rawManifest is a manifest pushed as its bytes, as an ORAS-style tool
// writes one.
type rawManifest struct {
	body []byte
	mt   types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.body, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

// blob is one blob of an artifact: its content and media type.
type blob struct {
	content string
	mt      types.MediaType
}

// pushArtifact uploads the blobs and pushes repo:latest as an OCI manifest
// with config (an empty one unless configType is set, the older tools'
// way of naming an artifact type) and artifactType.
func (s *server) pushArtifact(t *testing.T, repo, artifactType string, configType types.MediaType, layers ...blob) {
	t.Helper()
	r, err := name.NewRepository(s.host+"/"+repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc := func(b blob) v1.Descriptor {
		l := static.NewLayer([]byte(b.content), b.mt)
		if err := remote.WriteLayer(r, l); err != nil {
			t.Fatal(err)
		}
		d, _ := l.Digest()
		return v1.Descriptor{MediaType: b.mt, Size: int64(len(b.content)), Digest: d}
	}
	if configType == "" {
		configType = "application/vnd.oci.empty.v1+json"
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: artifactType, Config: desc(blob{"{}", configType})}
	for _, l := range layers {
		m.Layers = append(m.Layers, desc(l))
	}
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(s.ref(t, repo, "latest"), rawManifest{body, types.OCIManifestSchema1}); err != nil {
		t.Fatalf("push artifact %s: %v", repo, err)
	}
}

// A spec can be an OCI artifact of specsync's artifact type (named by
// artifactType, or by the config's media type as older tools do) whose one
// layer is the spec document; one with several layers and none of the
// spec's media types, or an invalid document, is that entry's error (not
// an unreachable repository); an artifact of another type (a Helm chart)
// offers nothing.
func TestOCISpecArtifacts(t *testing.T) {
	s := newGGCR(t)
	yamlDoc := blob{specYAML("redis"), spec.ArtifactLayerYAML}
	s.pushArtifact(t, "oci11", spec.ArtifactType, "", yamlDoc)
	s.pushArtifact(t, "oldstyle", "", spec.ArtifactType, blob{specYAML("postgres"), "application/vnd.oci.image.layer.v1.tar"})
	s.pushArtifact(t, "json", spec.ArtifactType, "", blob{`{"name":"mysql","description":"d","plans":[{"name":"p","description":"p"}]}`, spec.ArtifactLayerJSON})
	s.pushArtifact(t, "twolayers", spec.ArtifactType, "", blob{"a", "application/octet-stream"}, blob{"b", "application/octet-stream"})
	s.pushArtifact(t, "twospecs", spec.ArtifactType, "", yamlDoc, blob{specYAML("other"), spec.ArtifactLayerYAML})
	s.pushArtifact(t, "invalid", spec.ArtifactType, "", blob{"name: invalid\ndescription: no plans\n", spec.ArtifactLayerYAML})
	s.pushArtifact(t, "chart", "", "application/vnd.cncf.helm.config.v1+json", blob{"tgz", "application/vnd.cncf.helm.chart.content.v1.tar+gzip"})

	l := fetch(t, s.oci(t, registry.OCIConfig{PageSize: 1000}))
	got := byName(l)
	for repo, specName := range map[string]string{"oci11": "redis", "oldstyle": "postgres", "json": "mysql"} {
		e := got[repo]
		if e.Err != nil || e.Spec == nil || e.Spec.Name != specName || len(e.Spec.Platforms) != 0 {
			t.Errorf("%s: spec %+v, err %v; want %s with no platform", repo, e.Spec, e.Err, specName)
		}
	}
	for repo, want := range map[string]string{"twolayers": "none of media type", "twospecs": "more than one spec layer", "invalid": "spec artifact"} {
		if e := got[repo]; e.Err == nil || !strings.Contains(e.Err.Error(), want) {
			t.Errorf("%s: err %v, want one saying %q", repo, e.Err, want)
		}
	}
	if _, ok := got["chart"]; ok {
		t.Error("a Helm chart was taken for a spec")
	}

	// A registry of nothing but broken artifacts is entries in error, not
	// a registry that is down.
	only := newGGCR(t)
	only.pushArtifact(t, "twospecs", spec.ArtifactType, "", yamlDoc, blob{specYAML("other"), spec.ArtifactLayerYAML})
	if l := fetch(t, only.oci(t, registry.OCIConfig{PageSize: 1000})); len(l.Entries) != 1 || l.Entries[0].Err == nil {
		t.Errorf("one broken artifact: %+v", l.Entries)
	}
}

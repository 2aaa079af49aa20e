package registry_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"path"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/specsync/specsync/examples"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
)

// readFingerprints is, for each OCI read version (the ociReadVersion in
// every Upstream, "oci<version>@<digest>"), the fingerprint of what the
// corpus of TestOCIReadVersionNamesWhatAnImageGives reads as.
var readFingerprints = map[string]string{
	"1": "d99c5e93c21226b4aa529118f4feeb1d",
}

// An OCI entry's Upstream names the image and how this code reads it: a
// run hands a hint back to the source and trusts an unchanged listing by
// it, without reading the image again. So a change to what an image gives
// (the label or artifact taken, the platforms, the spec's parsing,
// validation, ids and digest) must come with a new read version, or
// every registry would keep what the version before read until its
// images moved. This test reads a corpus of images (the example specs,
// one as a multi-platform index, a spec artifact, an image without a
// label, a broken label, an invalid spec, a Helm chart) and compares what
// they give with the fingerprint recorded for the read version: a change
// in what they give fails it until the version is changed too.
func TestOCIReadVersionNamesWhatAnImageGives(t *testing.T) {
	t.Parallel()
	s := newGGCR(t)
	files, err := fs.ReadDir(examples.Registry, examples.RegistryDir)
	if err != nil || len(files) == 0 {
		t.Fatalf("the example specs: %v", err)
	}
	for i, f := range files {
		b, err := fs.ReadFile(examples.Registry, path.Join(examples.RegistryDir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		repo := strings.TrimSuffix(f.Name(), ".yaml")
		if i == 0 {
			s.pushIndex(t, repo, "latest",
				child{specImage(t, string(b), nil), &v1.Platform{OS: "linux", Architecture: "amd64"}},
				child{specImage(t, string(b), nil), &v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}},
				child{image(t, nil, nil), &v1.Platform{OS: "unknown", Architecture: "unknown"}})
			continue
		}
		s.pushImage(t, repo, "latest", specImage(t, string(b), &v1.Platform{OS: "linux", Architecture: "arm64"}))
	}
	s.pushArtifact(t, "artifact", spec.ArtifactType, "", blob{specYAML("artifact"), spec.ArtifactLayerYAML})
	s.pushArtifact(t, "chart", "", "application/vnd.cncf.helm.config.v1+json", blob{"tgz", "application/vnd.cncf.helm.chart.content.v1.tar+gzip"})
	s.pushImage(t, "nolabel", "latest", image(t, map[string]string{"org.example.other": "x"}, nil))
	s.pushImage(t, "broken", "latest", image(t, map[string]string{spec.LabelKey: "%%% not a spec"}, nil))
	s.pushSpec(t, "invalid", "name: invalid\ndescription: no plans\nplans: []\n")

	l := fetch(t, s.oci(t, registry.OCIConfig{PageSize: 1000}))
	type read struct {
		Name   string
		Spec   *spec.Spec `json:",omitempty"`
		Digest string     `json:",omitempty"`
		Broken bool       `json:",omitempty"`
		Quiet  bool       `json:",omitempty"`
	}
	var reads []read
	versions := map[string]bool{}
	for _, e := range l.Entries {
		r := read{Name: e.Name, Broken: e.Err != nil}
		if e.Spec != nil {
			spec.AssignIDs(e.Spec, "corpus")
			r.Spec, r.Digest = e.Spec, spec.Digest(e.Spec)
		}
		reads = append(reads, r)
		versions[strings.SplitN(e.Upstream, "@", 2)[0]] = true
	}
	for _, e := range l.Quiet {
		reads = append(reads, read{Name: e.Name, Quiet: true})
		versions[strings.SplitN(e.Upstream, "@", 2)[0]] = true
	}
	if len(versions) != 1 || len(reads) != len(files)+5 {
		t.Fatalf("read versions %v, %d reads", versions, len(reads))
	}
	var version string
	for v := range versions {
		version = strings.TrimPrefix(v, "oci")
	}
	b, err := json.Marshal(reads)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	got := hex.EncodeToString(sum[:16])
	if want, ok := readFingerprints[version]; !ok || want != got {
		t.Errorf("the corpus reads as %s under read version %s, which recorded %q.\n"+
			"What an image gives changed: change ociReadVersion (pkg/registry/oci.go) so that every image is read again, "+
			"and record readFingerprints[new version] = %q. (Only if nothing an image gives changed, record it under %s.)\n%s",
			got, version, want, got, version, b)
	}
}

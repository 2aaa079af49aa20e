package registry

import (
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/specsync/specsync/pkg/spec"
)

// A spec can be an OCI artifact instead of an image label: a manifest
// whose artifactType (OCI 1.1; older tools put it in the config's media
// type instead) is spec.ArtifactType, with one layer that is the spec
// document, YAML or JSON, as any ORAS-style tool pushes a file:
//
//	oras push HOST/REPO:latest --artifact-type application/vnd.specsync.spec.v1 redis.yaml:application/vnd.specsync.spec.v1+yaml
//
// The document is read as a label is (spec.Parse), bounded by
// spec.MaxSpecBytes; an artifact carries no platform.

// specArtifact reads what a spec artifact offers: its document, or the
// problem that makes it that entry's error (it does not hold exactly one
// document, or one too big). m is img's manifest. ok is false for any
// other manifest (an image, a Helm chart, a signature). err is a failure
// to read it from the registry.
func specArtifact(img v1.Image, m *v1.Manifest) (res ociResult, ok bool, err error) {
	if m.ArtifactType != spec.ArtifactType && string(m.Config.MediaType) != spec.ArtifactType {
		return res, false, nil
	}
	res.offers, res.artifact = true, true
	problem := func(format string, args ...any) (ociResult, bool, error) {
		res.problem = fmt.Sprintf(format, args...)
		return res, true, nil
	}
	layer := -1
	for i, l := range m.Layers {
		if string(l.MediaType) == spec.ArtifactLayerYAML || string(l.MediaType) == spec.ArtifactLayerJSON {
			if layer >= 0 {
				return problem("spec artifact has more than one spec layer")
			}
			layer = i
		}
	}
	switch {
	case layer < 0 && len(m.Layers) == 1:
		layer = 0 // one file, pushed with the tool's default media type
	case layer < 0:
		return problem("spec artifact has %d layers and none of media type %s: push the spec as its one layer", len(m.Layers), spec.ArtifactLayerYAML)
	}
	d := m.Layers[layer]
	if d.Size > int64(spec.MaxSpecBytes) {
		return problem("spec artifact layer is %d bytes, more than the %d a spec may have", d.Size, spec.MaxSpecBytes)
	}
	l, err := img.LayerByDigest(d.Digest)
	if err != nil {
		return res, true, fmt.Errorf("spec artifact layer %s: %w", d.Digest, err)
	}
	rc, err := l.Compressed() // the blob as stored: the document itself
	if err != nil {
		return res, true, fmt.Errorf("spec artifact layer %s: %w", d.Digest, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, int64(spec.MaxSpecBytes)+1))
	if err != nil {
		return res, true, fmt.Errorf("spec artifact layer %s: %w", d.Digest, err)
	}
	res.label = string(b)
	return res, true, nil
}

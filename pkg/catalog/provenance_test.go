package catalog

import (
	"encoding/json"
	"testing"

	"github.com/specsync/specsync/pkg/spec"
)

// A verified spec's service metadata says who signed the version served
// and its digest; a spec without provenance says nothing of it, and an
// author's own metadata.provenance is dropped (it would claim a signature
// nobody verified). The input spec is not modified.
func TestProvenanceMetadata(t *testing.T) {
	specs := fixtures()
	pg, redis, mq := specs[0], specs[1], specs[2]
	pg.Provenance = &spec.Provenance{Digest: "sha256:aa", Key: "sha256:fp"}
	redis.Provenance = &spec.Provenance{Digest: "sha256:bb", Identity: "ci@example.com", Issuer: "https://issuer.example"}
	mq.Metadata = map[string]any{"provenance": map[string]any{"key": "forged"}, "displayName": "MQ"}
	c := mustRender(t, specs)
	for name, want := range map[string]string{
		pg.Name:    `{"digest":"sha256:aa","key":"sha256:fp"}`,
		redis.Name: `{"digest":"sha256:bb","identity":"ci@example.com","issuer":"https://issuer.example"}`,
	} {
		got, _ := json.Marshal(findService(t, c, name).Metadata["provenance"])
		if string(got) != want {
			t.Errorf("%s: metadata.provenance %s, want %s", name, got, want)
		}
	}
	m := findService(t, c, mq.Name).Metadata
	if _, ok := m["provenance"]; ok || m["displayName"] != "MQ" {
		t.Errorf("mq: metadata %v, want the author's provenance dropped and the rest kept", m)
	}
	if _, ok := mq.Metadata["provenance"]; !ok {
		t.Error("Render modified the input spec's metadata")
	}
	if _, ok := pg.Metadata["provenance"]; ok {
		t.Error("Render wrote provenance into the input spec's metadata")
	}
}

package registry_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/helmtest"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// BenchmarkHelmProvenanceFetch is a new instance's first fetch of a
// chart repository of 50 signed charts (the index, every archive read),
// without a verify block and with verify.provenance (a .prov each, and
// its check): requests/op is what verify adds upstream; compare the two
// times as a ratio of one run. An unchanged chart costs neither, with or
// without (TestHelmProvenanceCostsOnlyWhatMoved).
func BenchmarkHelmProvenanceFetch(b *testing.B) {
	repo := helmtest.NewRepo(b)
	owner := verifytest.NewPGPKey(b, "Acme Charts", "charts@acme.example")
	for i := range 50 {
		repo.AddSigned(b, chart(fmt.Sprintf("c%02d", i), "1.0.0"), owner.SignProv)
	}
	for _, c := range []struct {
		name   string
		verify bool
	}{{"plain", false}, {"provenance", true}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := registry.HelmConfig{}
			if c.verify {
				cfg.Verify = verifytest.ProvenancePolicy(b, owner)
			}
			repo.Reset()
			for b.Loop() {
				l, err := repo.Source(b, cfg).Fetch(context.Background(), registry.FetchOptions{})
				if err != nil || len(l.Entries) != 50 {
					b.Fatalf("fetch: %v", err)
				}
			}
			b.ReportMetric(float64(len(repo.Requests()))/float64(b.N), "requests/op")
		})
	}
}

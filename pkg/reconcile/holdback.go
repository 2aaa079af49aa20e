package reconcile

import (
	"context"
	"sort"

	"github.com/specsync/specsync/pkg/store"
)

// heldBackRecords are the new versions the plan holds back, as a run
// records them (blockingInstances adds the instances).
func heldBackRecords(hs []HeldBack) []store.HeldBackSpec {
	var out []store.HeldBackSpec
	for _, h := range hs {
		out = append(out, store.HeldBackSpec{SpecID: h.Candidate.ID, Name: h.Candidate.Spec.Name, Digest: h.Candidate.Digest, Blockers: h.Blockers})
	}
	return out
}

// blockingInstances names, on each held-back record, the instances the
// new version would strand: one query per held-back spec, which is rare.
func blockingInstances(ctx context.Context, st *store.Store, hs []HeldBack, records []store.HeldBackSpec) error {
	for i, h := range hs {
		insts, err := st.SpecInstances(ctx, h.Candidate.ID, 10*store.MaxBlockingInstances)
		if err != nil {
			return err
		}
		var ids []string
		for _, in := range insts {
			if h.Candidate.Spec.Strands(in.PlanID, in.Platform) {
				ids = append(ids, in.ID)
			}
		}
		sort.Strings(ids)
		if len(ids) > store.MaxBlockingInstances {
			ids = ids[:store.MaxBlockingInstances]
		}
		records[i].Instances = ids
	}
	return nil
}

package reconcile

import (
	"encoding/json"
	"fmt"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

// Candidates turns listing entries into planning candidates: a private
// copy of each spec (sources may cache theirs) with ids assigned for the
// registry and its digest computed. An entry given back from the run's
// hint is the spec the hint names, as the run that recorded it planned
// it.
func Candidates(registryName string, entries []registry.Entry) []Candidate {
	out := make([]Candidate, 0, len(entries))
	for _, e := range entries {
		c := Candidate{Entry: e.Name, Ref: e.Ref, Err: e.Err}
		switch {
		case e.Err != nil:
		case e.Hint != nil:
			c.ID, c.Name, c.Digest, c.Hinted = e.Hint.SpecID, e.Hint.SpecName, e.Hint.SpecDigest, true
		case e.Spec != nil:
			s, err := cloneSpec(e.Spec)
			if err != nil {
				c.Err = err
			} else {
				spec.AssignIDs(s, registryName)
				c.Spec, c.ID, c.Name, c.Digest = s, s.ID, s.Name, spec.Digest(s)
			}
		}
		out = append(out, c)
	}
	return out
}

func cloneSpec(s *spec.Spec) (*spec.Spec, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("spec %s: encode: %w", s.Name, err)
	}
	var c spec.Spec
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("spec %s: decode: %w", s.Name, err)
	}
	return &c, nil
}

// storedFrom is what planning needs of the stored records.
func storedFrom(records []store.SpecRecord) []Stored {
	out := make([]Stored, len(records))
	for i, rec := range records {
		out[i] = Stored{ID: rec.ID, Entry: rec.Entry, Name: rec.Name, Digest: rec.Digest, State: rec.State, Instances: int(rec.Instances), EntryError: rec.EntryError,
			HeldBack: rec.HeldBack != nil, PlansInUse: counts(rec.PlanInstances), PlatformsInUse: counts(rec.PlatformInstances)}
	}
	return out
}

func counts(m map[string]int64) map[string]int {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = int(v)
	}
	return out
}

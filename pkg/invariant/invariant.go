// Package invariant reads the whole Firestore state of a specsync project
// and checks every guarantee of the design (docs/design.md) that can
// be seen in the data. Every reliability scenario ends with it: a fault
// may stop a run, but it must never leave the catalog in a state these
// rules reject.
//
// What it checks (the rule names are those of Violation.Rule):
//
//	instance-spec     every instance points at a stored spec (nothing in use is deleted:
//	                  no spec that instances use was deleted)
//	instance-id       an instance's id field is its document id
//	binding-instance  every binding (instances/{id}/bindings/{b}) has its
//	                  instance: no binding outlives a deprovision
//	binding-id        a binding's id and instance_id fields are its
//	                  document id and its parent's
//	binding-spec      a binding is of its instance's service
//	parameters-digest an instance's or binding's parameters_digest is
//	                  absent, "none" or salted Argon2id in PHC form at
//	                  the broker's cost (store.CheckParametersDigest):
//	                  never the parameters, nor a digest cheap to guess
//	binding-counter   an instance has at most store.MaxBindingsPerInstance
//	                  binding documents (no count is stored: a bind writes
//	                  only its own document)
//	tombstone         a tombstone's document id is the one its kind and
//	                  ids name, and it expires after it was written
//	spec-id           a spec's id field, its stored spec's id and its
//	                  document id agree; no plan carries the id derived
//	                  from another spec id than its spec's (ids are forever)
//	spec-stable       a spec (registry, name) seen in an earlier snapshot
//	                  still has the id it had then (ids are forever)
//	spec-body         the stored spec decodes, has the recorded name, its
//	                  digest is the content digest of what is stored, its
//	                  plan ids are set and distinct
//	spec-state        state is active or marked; a marked spec has
//	                  marked_at and marked_run, an active one neither
//	spec-generation   a stored spec has adopted a version (generation >= 1)
//	registry-marked   a registry's recorded marked count is the number of
//	                  its marked specs (settled state only)
//	manifest          a registry's manifest that a run would trust (its run
//	                  is the registry's writer, no lease left) is whole
//	                  (every shard of that run) and describes the store: an
//	                  entry for every spec the registry owns, with its entry,
//	                  digest and state, clean only if the spec is active
//	                  without entry error or hold; none for another's spec
//	                  (a marked entry may outlive its deleted spec); an
//	                  entry a run would hand a source as a hint (its
//	                  upstream digest and spec name kept, one spec of its
//	                  entry active and clean) names that spec, stored
//	                  active and clean under that name
//	feed-dense        committed change revisions are distinct and dense
//	                  (a pruned prefix aside) up to meta/catalog's revision
//	feed-pending      a pending change carries pending_at (what the
//	                  committer selects and orders by), a committed one
//	                  does not; no change is left pending once runs and
//	                  the commit after them finished (settled state only)
//	feed-truth        the last committed change of each spec agrees with
//	                  the spec as stored (settled state only)
//	operation         an operation's state is one of OSB's, its results
//	                  name only its registries, a succeeded one has every
//	                  registry succeeded, meta/bootstrap names a stored one;
//	                  one waiting for its commit has every result; a
//	                  finished real (not dry) one that has a catalog
//	                  revision waited for its commit, and the catalog is at
//	                  least there; a succeeded real one has its revision
//	                  (read-your-writes), a dry run none
//	secret            no canary string appears in any document id, field
//	                  name or value, in any collection (secrets never travel)
package invariant

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
)

// Violation is one broken rule.
type Violation struct {
	Rule   string // see the package comment
	Doc    string // document path, when one document is at fault
	Detail string
}

func (v Violation) String() string {
	if v.Doc == "" {
		return v.Rule + ": " + v.Detail
	}
	return v.Rule + ": " + v.Doc + ": " + v.Detail
}

// Options says what the caller knows about the moment of the snapshot.
type Options struct {
	// Canaries are secret values (registry passwords and tokens, broker
	// credentials, admin tokens) that must appear nowhere.
	Canaries []string
	// Settled says no run or commit is in flight, every run finished
	// normally and a commit ran after the last of them: nothing may be
	// pending, and recorded counts must be exact. Leave it off for a
	// snapshot taken right after a crash, before recovery.
	Settled bool
	// Feed requires change records: a catalog revision above zero with no
	// committed change is then a violation. Without it the feed rules
	// still apply whenever the project holds change records.
	Feed bool
	// Previous is an earlier snapshot of the same project; every spec in
	// both must have kept its id.
	Previous *State
	// Shallow reads the top-level collections only, not subcollections:
	// for a large project (the emulator lists a document's subcollections
	// in time proportional to the whole database, so 20,000 documents
	// take minutes). The secret rule then covers top-level documents only;
	// specsync writes no subcollection.
	Shallow bool
}

// Check reads the project and checks it.
func Check(ctx context.Context, client *firestore.Client, opts Options) (*State, []Violation, error) {
	st, err := read(ctx, client, opts.Shallow)
	if err != nil {
		return nil, nil, err
	}
	return st, st.Check(opts), nil
}

// Require checks the project and fails the test with every violation. It
// returns the state, to pass as Options.Previous to a later check.
func Require(t testing.TB, client *firestore.Client, opts Options) *State {
	t.Helper()
	st, failed := check(t, client, opts)
	if failed {
		t.FailNow()
	}
	return st
}

// check checks the project and reports every violation as a test error.
func check(t testing.TB, client *firestore.Client, opts Options) (st *State, failed bool) {
	t.Helper()
	// Generous: a project of 20,000 documents on an emulator shared with
	// a whole test run takes minutes to read.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, vs, err := Check(ctx, client, opts)
	if err != nil {
		t.Errorf("invariant check: %v", err)
		return nil, true
	}
	if len(vs) > 0 {
		lines := make([]string, len(vs))
		for i, v := range vs {
			lines[i] = "  " + v.String()
		}
		t.Errorf("invariant check: %d violations:\n%s", len(vs), strings.Join(lines, "\n"))
		return st, true
	}
	return st, false
}

// AtEnd is the check a test environment registers for the end of its
// test (CheckAtEnd): every test built on the environment ends with the
// checker, without having to remember to call it. A test that
// deliberately ends in a state the check would reject says so, and why.
type AtEnd struct {
	// Options are those the check runs with; a test adds what it knows
	// (Canaries, Previous) before it ends.
	Options
	skip string
}

// CheckAtEnd registers a Require of client's project with opts for when
// t and its subtests have finished (t.Cleanup; cleanups registered
// earlier, such as closing the client, run after it). A test that has
// already failed is not checked again: its first failure is the one to
// read, and a run it stopped half-way is not a settled state.
func CheckAtEnd(t testing.TB, client *firestore.Client, opts Options) *AtEnd {
	t.Helper()
	a := &AtEnd{Options: opts}
	t.Cleanup(func() {
		if a.skip != "" || t.Failed() {
			return
		}
		// An error, not Require's FailNow: a Goexit in a cleanup loses
		// the test's own "--- FAIL" line (and its -json result event).
		check(t, client, a.Options)
	})
	return a
}

// Unsettled relaxes the end check to the rules that hold at every
// instant: the test ends with a run or a commit deliberately unfinished
// (changes pending, counts not yet recorded). why says what is left so.
func (a *AtEnd) Unsettled(why string) {
	if why == "" {
		panic("invariant: Unsettled needs the reason the test ends unsettled")
	}
	a.Settled = false
}

// Skip drops the end check: the test deliberately leaves a state that
// breaks a rule (a document written straight to Firestore to show the
// rule catches it, say). why says which and why.
func (a *AtEnd) Skip(why string) {
	if why == "" {
		panic("invariant: Skip needs the reason the test leaves a violating state")
	}
	a.skip = why
}

// Check checks the snapshot. Violations come sorted by rule, then document.
func (s *State) Check(opts Options) []Violation {
	c := &checker{s: s, opts: opts}
	c.out = append(c.out, s.decodeErrors...)
	c.instances()
	c.bindings()
	c.specs()
	c.registries()
	c.manifests()
	c.feed()
	c.operations()
	c.secrets()
	sort.SliceStable(c.out, func(i, j int) bool {
		if c.out[i].Rule != c.out[j].Rule {
			return c.out[i].Rule < c.out[j].Rule
		}
		return c.out[i].Doc < c.out[j].Doc
	})
	return c.out
}

type checker struct {
	s    *State
	opts Options
	out  []Violation
}

func (c *checker) add(rule, doc, format string, args ...any) {
	c.out = append(c.out, Violation{Rule: rule, Doc: doc, Detail: fmt.Sprintf(format, args...)})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

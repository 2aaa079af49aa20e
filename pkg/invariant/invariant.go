// Package invariant reads the whole Firestore state of a specsync project
// and checks every guarantee of the design (docs/design.md) that can
// be seen in the data. Every reliability scenario ends with it: a fault
// may stop a run, but it must never leave the catalog in a state these
// rules reject.
//
// What it checks (the rule names are those of Violation.Rule):
//
//	instance-spec     every instance points at a stored spec (nothing
//	                  in use is deleted)
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
//	binding-counter   an instance's bindings count is the number of its
//	                  binding documents, at most store.MaxBindingsPerInstance
//	                  (bindings pin nothing: spec-counters counts instances
//	                  only, so a binding that moved a spec's count breaks it)
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
//	spec-counters     instances, plan_instances and platform_instances
//	                  equal what the instance records say
//	spec-generation   a stored spec has adopted a version (generation >= 1)
//	registry-marked   a registry's recorded marked count is the number of
//	                  its marked specs (settled state only)
//	manifest          a registry's manifest that a run would trust (its run
//	                  is the registry's writer, no lease left) is whole
//	                  (every shard of that run) and describes the store: an
//	                  entry for every spec the registry owns, with its entry,
//	                  digest and state, clean only if the spec is active
//	                  without entry error or hold; none for another's spec
//	                  (a marked entry may outlive its deleted spec)
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
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"golang.org/x/sync/errgroup"
	"google.golang.org/api/iterator"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
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

// ChangeDoc is a changes/{id} document with its id.
type ChangeDoc struct {
	DocID string
	store.Change
}

// BindingDoc is an instances/{id}/bindings/{binding_id} document with the
// ids its path gives it.
type BindingDoc struct {
	InstanceDocID, DocID string
	store.Binding
}

// State is a whole project as read from Firestore.
type State struct {
	Specs     map[string]store.SpecRecord // by document id
	Instances map[string]store.Instance   // by document id
	// Bindings are every instance's bindings, by document path below the
	// database root; a binding whose instance document is gone is here too.
	Bindings   map[string]BindingDoc
	Tombstones map[string]store.Tombstone // by document id
	Registries map[string]store.RegistryStatus
	Changes    []ChangeDoc
	Operations map[string]api.Operation
	// Manifests are the manifest shards, by document id.
	Manifests map[string]store.ManifestShard
	// Catalog is meta/catalog: revision and published.
	Catalog struct {
		Revision  int64 `firestore:"revision"`
		Published int64 `firestore:"published"`
	}
	CatalogExists bool
	// CurrentOperation is what meta/bootstrap names ("" without one).
	CurrentOperation string
	// Raw is every document of every collection (subcollections too), by
	// path, as stored; the secret rule scans it.
	Raw map[string]map[string]any
	// decodeErrors are documents of the known collections that do not
	// decode into their type.
	decodeErrors []Violation
}

// Read reads the whole project.
func Read(ctx context.Context, client *firestore.Client) (*State, error) {
	return read(ctx, client, false)
}

func read(ctx context.Context, client *firestore.Client, shallow bool) (*State, error) {
	s := &State{
		Specs:      map[string]store.SpecRecord{},
		Instances:  map[string]store.Instance{},
		Bindings:   map[string]BindingDoc{},
		Tombstones: map[string]store.Tombstone{},
		Registries: map[string]store.RegistryStatus{},
		Operations: map[string]api.Operation{},
		Manifests:  map[string]store.ManifestShard{},
		Raw:        map[string]map[string]any{},
	}
	cols := client.Collections(ctx)
	for {
		col, err := cols.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("invariant: list collections: %w", err)
		}
		if err := s.readCollection(ctx, col, true, shallow); err != nil {
			return nil, err
		}
	}
	sort.Slice(s.Changes, func(i, j int) bool { return s.Changes[i].DocID < s.Changes[j].DocID })
	return s, nil
}

func (s *State) readCollection(ctx context.Context, col *firestore.CollectionRef, top, shallow bool) error {
	snaps, err := col.Documents(ctx).GetAll()
	if err != nil {
		return fmt.Errorf("invariant: read %s: %w", col.Path, err)
	}
	// Documents that only hold subcollections are not returned by a
	// query; DocumentRefs lists them too.
	refs, err := col.DocumentRefs(ctx).GetAll()
	if err != nil {
		return fmt.Errorf("invariant: list %s: %w", col.Path, err)
	}
	for _, snap := range snaps {
		s.Raw[relPath(snap.Ref)] = snap.Data()
		switch {
		case top:
			s.decode(col.ID, snap)
		case col.ID == store.BindingsCollection && col.Parent != nil && col.Parent.Parent != nil && col.Parent.Parent.ID == store.InstancesCollection:
			var b store.Binding
			if err := snap.DataTo(&b); err != nil {
				s.decodeErrors = append(s.decodeErrors, Violation{Rule: "decode", Doc: relPath(snap.Ref), Detail: err.Error()})
				continue
			}
			s.Bindings[relPath(snap.Ref)] = BindingDoc{InstanceDocID: col.Parent.ID, DocID: snap.Ref.ID, Binding: b}
		}
	}
	if shallow {
		return nil
	}
	// Asking every document for its subcollections is one call each: a
	// few at a time.
	subs := make([][]*firestore.CollectionRef, len(refs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, ref := range refs {
		g.Go(func() error {
			cs, err := ref.Collections(gctx).GetAll()
			if err != nil {
				return fmt.Errorf("invariant: list subcollections of %s: %w", ref.Path, err)
			}
			subs[i] = cs
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, cs := range subs {
		for _, sub := range cs {
			if err := s.readCollection(ctx, sub, false, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// relPath is a document's path below the database root.
func relPath(ref *firestore.DocumentRef) string {
	if i := strings.Index(ref.Path, "/documents/"); i >= 0 {
		return ref.Path[i+len("/documents/"):]
	}
	return ref.Path
}

func (s *State) decode(collection string, snap *firestore.DocumentSnapshot) {
	bad := func(err error) {
		s.decodeErrors = append(s.decodeErrors, Violation{Rule: "decode", Doc: relPath(snap.Ref), Detail: err.Error()})
	}
	id := snap.Ref.ID
	switch collection {
	case store.SpecsCollection:
		var r store.SpecRecord
		if err := snap.DataTo(&r); err != nil {
			bad(err)
			return
		}
		s.Specs[id] = r
	case store.InstancesCollection:
		var r store.Instance
		if err := snap.DataTo(&r); err != nil {
			bad(err)
			return
		}
		s.Instances[id] = r
	case store.TombstonesCollection:
		var r store.Tombstone
		if err := snap.DataTo(&r); err != nil {
			bad(err)
			return
		}
		s.Tombstones[id] = r
	case store.RegistriesCollection:
		var r store.RegistryStatus
		if err := snap.DataTo(&r); err != nil {
			bad(err)
			return
		}
		r.Name = id
		s.Registries[id] = r
	case store.ChangesCollection:
		var c store.Change
		if err := snap.DataTo(&c); err != nil {
			bad(err)
			return
		}
		s.Changes = append(s.Changes, ChangeDoc{DocID: id, Change: c})
	case store.ManifestsCollection:
		var m store.ManifestShard
		if err := snap.DataTo(&m); err != nil {
			bad(err)
			return
		}
		s.Manifests[id] = m
	case store.OperationsCollection:
		var op api.Operation
		if err := snap.DataTo(&op); err != nil {
			bad(err)
			return
		}
		s.Operations[id] = op
	case store.MetaCollection:
		switch id {
		case "catalog":
			if err := snap.DataTo(&s.Catalog); err != nil {
				bad(err)
				return
			}
			s.CatalogExists = true
		case "bootstrap":
			if v, err := snap.DataAt("operation"); err == nil && v != nil {
				s.CurrentOperation = fmt.Sprint(v)
			}
		}
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, vs, err := Check(ctx, client, opts)
	if err != nil {
		t.Fatalf("invariant check: %v", err)
	}
	if len(vs) > 0 {
		lines := make([]string, len(vs))
		for i, v := range vs {
			lines[i] = "  " + v.String()
		}
		t.Fatalf("invariant check: %d violations:\n%s", len(vs), strings.Join(lines, "\n"))
	}
	return st
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

func (c *checker) instances() {
	for _, id := range sortedKeys(c.s.Instances) {
		inst := c.s.Instances[id]
		doc := store.InstancesCollection + "/" + id
		if inst.ID != id {
			c.add("instance-id", doc, "id field %q is not the document id", inst.ID)
		}
		if _, ok := c.s.Specs[inst.SpecID]; !ok {
			c.add("instance-spec", doc, "points at spec %s, which is not stored", inst.SpecID)
		}
		if err := store.CheckParametersDigest(inst.ParametersDigest); err != nil {
			c.add("parameters-digest", doc, "%v", err)
		}
	}
}

func (c *checker) bindings() {
	per := map[string]int64{}
	for _, path := range sortedKeys(c.s.Bindings) {
		b := c.s.Bindings[path]
		per[b.InstanceDocID]++
		if b.ID != b.DocID || b.InstanceID != b.InstanceDocID {
			c.add("binding-id", path, "id field %q and instance_id %q are not the document's %q and %q", b.ID, b.InstanceID, b.DocID, b.InstanceDocID)
		}
		if err := store.CheckParametersDigest(b.ParametersDigest); err != nil {
			c.add("parameters-digest", path, "%v", err)
		}
		inst, ok := c.s.Instances[b.InstanceDocID]
		if !ok {
			c.add("binding-instance", path, "instance %s is not stored: the binding outlived it", b.InstanceDocID)
			continue
		}
		if b.SpecID != inst.SpecID {
			c.add("binding-spec", path, "is of service %s, its instance of %s", b.SpecID, inst.SpecID)
		}
	}
	for _, id := range sortedKeys(c.s.Instances) {
		inst := c.s.Instances[id]
		doc := store.InstancesCollection + "/" + id
		if inst.Bindings != per[id] {
			c.add("binding-counter", doc, "bindings is %d, %d binding documents exist", inst.Bindings, per[id])
		}
		if per[id] > store.MaxBindingsPerInstance {
			c.add("binding-counter", doc, "%d bindings, more than the %d an instance may have", per[id], store.MaxBindingsPerInstance)
		}
	}
	for _, id := range sortedKeys(c.s.Tombstones) {
		t := c.s.Tombstones[id]
		if id != t.DocID() || (t.Kind != store.TombstoneInstance && t.Kind != store.TombstoneBinding) {
			c.add("tombstone", store.TombstonesCollection+"/"+id, "a %q tombstone of instance %q binding %q is stored as %q", t.Kind, t.InstanceID, t.BindingID, id)
		}
		if !t.ExpiresAt.After(t.DeletedAt) {
			c.add("tombstone", store.TombstonesCollection+"/"+id, "expires at %v, not after it was written (%v)", t.ExpiresAt, t.DeletedAt)
		}
	}
}

type usage struct {
	total     int64
	plans     map[string]int64
	platforms map[string]int64
}

func (c *checker) specs() {
	used := map[string]*usage{}
	for _, inst := range c.s.Instances {
		u := used[inst.SpecID]
		if u == nil {
			u = &usage{plans: map[string]int64{}, platforms: map[string]int64{}}
			used[inst.SpecID] = u
		}
		u.total++
		u.plans[inst.PlanID]++
		if inst.Platform != "" {
			u.platforms[inst.Platform]++
		}
	}
	byName := map[[2]string]string{}
	for _, id := range sortedKeys(c.s.Specs) {
		r := c.s.Specs[id]
		doc := store.SpecsCollection + "/" + id
		byName[[2]string{r.Registry, r.Name}] = id
		if r.ID != id {
			c.add("spec-id", doc, "id field %q is not the document id", r.ID)
		}
		if r.Registry == "" {
			c.add("spec-id", doc, "no owning registry")
		}
		c.body(doc, id, r)
		switch r.State {
		case store.StateActive:
			if !r.MarkedAt.IsZero() || r.MarkedRun != "" {
				c.add("spec-state", doc, "active but carries marked_at %v / marked_run %q", r.MarkedAt, r.MarkedRun)
			}
		case store.StateMarked:
			if r.MarkedAt.IsZero() || r.MarkedRun == "" {
				c.add("spec-state", doc, "marked without marked_at (%v) or marked_run (%q)", r.MarkedAt, r.MarkedRun)
			}
		default:
			c.add("spec-state", doc, "state %q is neither active nor marked", r.State)
		}
		u := used[id]
		if u == nil {
			u = &usage{}
		}
		if r.Instances != u.total {
			c.add("spec-counters", doc, "instances is %d, %d instance records point at it", r.Instances, u.total)
		}
		if !sameCounts(r.PlanInstances, u.plans) {
			c.add("spec-counters", doc, "plan_instances is %v, instance records say %v", r.PlanInstances, u.plans)
		}
		if !sameCounts(r.PlatformInstances, u.platforms) {
			c.add("spec-counters", doc, "platform_instances is %v, instance records say %v", r.PlatformInstances, u.platforms)
		}
		if r.Generation < 1 {
			c.add("spec-generation", doc, "generation %d: a stored spec has adopted at least one version", r.Generation)
		}
		if h := r.HeldBack; h != nil && h.SpecID != "" && h.SpecID != id {
			c.add("spec-id", doc, "holds back a version of spec %s", h.SpecID)
		}
	}
	if p := c.opts.Previous; p != nil {
		for _, id := range sortedKeys(p.Specs) {
			old := p.Specs[id]
			now, ok := byName[[2]string{old.Registry, old.Name}]
			if ok && now != id {
				c.add("spec-stable", store.SpecsCollection+"/"+now, "spec %q of registry %s had id %s, now %s", old.Name, old.Registry, id, now)
			}
		}
	}
}

// body checks the stored spec against its record.
func (c *checker) body(doc, id string, r store.SpecRecord) {
	sp, err := r.Spec()
	if err != nil {
		c.add("spec-body", doc, "%v", err)
		return
	}
	if sp.ID != id {
		c.add("spec-id", doc, "stored spec has id %q", sp.ID)
	}
	if sp.Name != r.Name {
		c.add("spec-body", doc, "stored spec is named %q, the record %q", sp.Name, r.Name)
	}
	// Ids are assigned before the digest is taken, so the digest of what
	// is stored is the recorded one.
	if d := spec.Digest(sp); d != r.Digest {
		c.add("spec-body", doc, "digest %s is not the content digest %s of the stored spec", r.Digest, d)
	}
	derived := spec.DeriveSpecID(r.Registry, sp.Name)
	seen := map[string]bool{}
	for i, p := range sp.Plans {
		switch {
		case p.ID == "":
			c.add("spec-body", doc, "plan %d (%s) has no id", i, p.Name)
		case seen[p.ID]:
			c.add("spec-body", doc, "plan id %s is used twice", p.ID)
		}
		seen[p.ID] = true
		// A plan id derived from another spec id than this one means the
		// spec's id changed under its plans.
		if id != derived && p.ID == spec.DerivePlanID(derived, p.Name) {
			c.add("spec-id", doc, "plan %s has the id derived from spec id %s, not from %s", p.Name, derived, id)
		}
	}
}

// sameCounts compares a stored counter map with the counted one; a stored
// zero is the same as no entry (a decrement to zero leaves the key).
func sameCounts(stored, counted map[string]int64) bool {
	for k, v := range stored {
		if v != counted[k] {
			return false
		}
	}
	for k, v := range counted {
		if stored[k] != v {
			return false
		}
	}
	return true
}

func (c *checker) registries() {
	if !c.opts.Settled {
		return
	}
	marked := map[string]int{}
	for _, r := range c.s.Specs {
		if r.State == store.StateMarked {
			marked[r.Registry]++
		}
	}
	for _, name := range sortedKeys(c.s.Registries) {
		st := c.s.Registries[name]
		if st.LastRun.ID == "" {
			continue // never ran here (a contested_by or lease record only)
		}
		if st.Marked != marked[name] {
			c.add("registry-marked", store.RegistriesCollection+"/"+name, "records %d marked specs, %d are stored marked", st.Marked, marked[name])
		}
	}
}

func (c *checker) manifests() {
	for _, name := range sortedKeys(c.s.Registries) {
		st := c.s.Registries[name]
		if !st.ManifestTrusted() {
			continue
		}
		doc := store.RegistriesCollection + "/" + name
		h := st.Manifest
		entries := map[string]store.ManifestEntry{}
		whole := true
		for i := range h.Shards {
			id := fmt.Sprintf("%s.%d", name, i)
			sh, ok := c.s.Manifests[id]
			if !ok || sh.Run != h.Run || sh.Shard != i || sh.Shards != h.Shards || sh.Registry != name {
				c.add("manifest", store.ManifestsCollection+"/"+id, "shard %d of the manifest of run %s is missing or another's (%+v)", i, h.Run, sh)
				whole = false
				continue
			}
			es, err := sh.Decode()
			if err != nil {
				c.add("manifest", store.ManifestsCollection+"/"+id, "%v", err)
				whole = false
				continue
			}
			for _, e := range es {
				if _, dup := entries[e.SpecID]; dup {
					c.add("manifest", doc, "spec %s is in the manifest twice", e.SpecID)
				}
				entries[e.SpecID] = e
			}
		}
		if !whole {
			continue
		}
		if len(entries) != h.Entries {
			c.add("manifest", doc, "the header says %d entries, the shards hold %d", h.Entries, len(entries))
		}
		for _, id := range sortedKeys(c.s.Specs) {
			r := c.s.Specs[id]
			if r.Registry != name {
				continue
			}
			e, ok := entries[id]
			switch {
			case !ok:
				c.add("manifest", doc, "spec %s (%s) is not in the trusted manifest: a run would never see it", id, r.Name)
			case e.Entry != r.Entry || e.Digest != r.Digest || e.State != r.State:
				c.add("manifest", doc, "spec %s: the manifest says entry %q digest %s %s, the store %q %s %s", id, e.Entry, e.Digest, e.State, r.Entry, r.Digest, r.State)
			case e.Clean && !r.Clean():
				c.add("manifest", doc, "spec %s is clean in the manifest, but %s with entry error %q and held back %v", id, r.State, r.EntryError, r.HeldBack != nil)
			}
		}
		for _, id := range sortedKeys(entries) {
			r, stored := c.s.Specs[id]
			if stored && r.Registry == name {
				continue
			}
			if e := entries[id]; e.State != store.StateMarked {
				c.add("manifest", doc, "spec %s is in the manifest %s, but %s", id, e.State, describeOwner(r, stored))
			}
		}
	}
}

func describeOwner(r store.SpecRecord, stored bool) string {
	if !stored {
		return "not stored"
	}
	return "owned by registry " + r.Registry
}

func (c *checker) feed() {
	if len(c.s.Changes) == 0 {
		if c.opts.Feed && c.s.Catalog.Revision > 0 {
			c.add("feed-dense", "meta/catalog", "revision %d but no change record", c.s.Catalog.Revision)
		}
		return
	}
	byRev := map[int64]string{}
	var revs []int64
	var pending []ChangeDoc
	for _, ch := range c.s.Changes {
		doc := store.ChangesCollection + "/" + ch.DocID
		if ch.Pending() {
			if ch.PendingAt.IsZero() && ch.LegacyPendingRegistry == "" {
				c.add("feed-pending", doc, "pending without pending_at: no commit would ever number it")
			}
			pending = append(pending, ch)
			continue
		}
		if !ch.PendingAt.IsZero() || ch.LegacyPendingRegistry != "" {
			c.add("feed-pending", doc, "numbered %d yet still marked pending (pending_at %v, pending_registry %q)", ch.Revision, ch.PendingAt, ch.LegacyPendingRegistry)
		}
		if prev, dup := byRev[ch.Revision]; dup {
			c.add("feed-dense", doc, "revision %d is also that of changes/%s", ch.Revision, prev)
			continue
		}
		byRev[ch.Revision] = ch.DocID
		revs = append(revs, ch.Revision)
	}
	if c.opts.Settled {
		for _, ch := range pending {
			c.add("feed-pending", store.ChangesCollection+"/"+ch.DocID, "change %s of spec %s (registry %s) still pending, written %v", ch.Kind, ch.SpecID, ch.Registry, ch.At)
		}
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i] < revs[j] })
	top := c.s.Catalog.Revision
	if len(revs) == 0 {
		if top > 0 && c.opts.Settled {
			c.add("feed-dense", "meta/catalog", "revision %d but no committed change", top)
		}
		return
	}
	lo, hi := revs[0], revs[len(revs)-1]
	if lo < 1 {
		c.add("feed-dense", "", "revision %d is below 1", lo)
	}
	if hi != top {
		c.add("feed-dense", "meta/catalog", "revision %d, highest committed change %d", top, hi)
	}
	if n := int64(len(revs)); hi-lo+1 != n {
		var gaps []string
		for i := 1; i < len(revs) && len(gaps) < 10; i++ {
			if revs[i] != revs[i-1]+1 {
				gaps = append(gaps, fmt.Sprintf("%d..%d", revs[i-1]+1, revs[i]-1))
			}
		}
		c.add("feed-dense", "", "revisions %d..%d hold %d changes; missing %s", lo, hi, n, strings.Join(gaps, ", "))
	}
	if c.s.Catalog.Published > top {
		c.add("feed-dense", "meta/catalog", "published %d is beyond revision %d", c.s.Catalog.Published, top)
	}
	if c.opts.Settled {
		c.feedTruth()
	}
}

// feedTruth: the last committed change of each spec says what the store
// holds, so a subscriber that applied the feed sees the stored catalog.
func (c *checker) feedTruth() {
	last := map[string]store.Change{}
	for _, ch := range c.s.Changes {
		if ch.Revision == 0 || ch.Kind == store.KindHeldBack {
			continue
		}
		if cur, ok := last[ch.SpecID]; !ok || ch.Revision > cur.Revision {
			last[ch.SpecID] = ch.Change
		}
	}
	for _, id := range sortedKeys(last) {
		ch := last[id]
		doc := fmt.Sprintf("%s (revision %d)", store.SpecsCollection+"/"+id, ch.Revision)
		r, stored := c.s.Specs[id]
		switch {
		case ch.Kind == store.KindDeleted:
			if stored {
				c.add("feed-truth", doc, "the feed says deleted, the spec is stored (%s)", r.State)
			}
		case !ch.InCatalog():
			if !stored || r.State != store.StateMarked {
				c.add("feed-truth", doc, "the feed says %s (out of the catalog), the store has %s", ch.Kind, describe(r, stored))
			}
		default:
			if !stored || r.State != store.StateActive {
				c.add("feed-truth", doc, "the feed says %s (in the catalog), the store has %s", ch.Kind, describe(r, stored))
			} else if !sameJSON(ch.SpecJSON, r.SpecJSON) {
				c.add("feed-truth", doc, "the feed's spec is not the stored one")
			} else if ch.Generation != 0 && ch.Generation != r.Generation {
				c.add("feed-truth", doc, "the feed says generation %d, the store has %d", ch.Generation, r.Generation)
			}
		}
	}
	// A spec in the catalog must have been announced, unless its change
	// expired: only then can the oldest retained revision be above 1.
	lowest := int64(0)
	for _, ch := range c.s.Changes {
		if ch.Revision > 0 && (lowest == 0 || ch.Revision < lowest) {
			lowest = ch.Revision
		}
	}
	if lowest == 1 {
		for _, id := range sortedKeys(c.s.Specs) {
			if _, ok := last[id]; !ok && c.s.Specs[id].State == store.StateActive {
				c.add("feed-truth", store.SpecsCollection+"/"+id, "in the catalog but never announced by a change")
			}
		}
	}
}

func describe(r store.SpecRecord, stored bool) string {
	if !stored {
		return "no such spec"
	}
	return "it " + string(r.State)
}

func sameJSON(a, b string) bool {
	if a == b {
		return true
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func (c *checker) operations() {
	for _, id := range sortedKeys(c.s.Operations) {
		op := c.s.Operations[id]
		doc := store.OperationsCollection + "/" + id
		switch op.State {
		case api.InProgress, api.Failed:
		case api.Succeeded:
			for _, r := range op.Registries {
				res, ok := op.Results[r]
				if !ok {
					c.add("operation", doc, "succeeded without a result from registry %s", r)
				} else if res.State != api.Succeeded {
					c.add("operation", doc, "succeeded although registry %s %s", r, res.State)
				}
			}
		default:
			c.add("operation", doc, "state %q is not an OSB last_operation state", op.State)
		}
		switch {
		case op.DryRun && (op.Commit != nil || op.CatalogRevision != nil):
			c.add("operation", doc, "a dry run waited for a commit or names a catalog revision")
		case op.Commit != nil && len(op.Results) != len(op.Registries):
			c.add("operation", doc, "waits for its commit with %d of %d results", len(op.Results), len(op.Registries))
		case op.CatalogRevision != nil && (op.Commit == nil || op.Commit.CommittedAt.IsZero()):
			c.add("operation", doc, "names catalog revision %d without a finished commit", *op.CatalogRevision)
		case op.CatalogRevision != nil && *op.CatalogRevision > c.s.Catalog.Revision:
			c.add("operation", doc, "names catalog revision %d, beyond meta/catalog's %d", *op.CatalogRevision, c.s.Catalog.Revision)
		case op.State == api.Succeeded && !op.DryRun && op.CatalogRevision == nil:
			c.add("operation", doc, "succeeded without the catalog revision its changes reached")
		}
		regs := map[string]bool{}
		for _, r := range op.Registries {
			regs[r] = true
		}
		for _, r := range sortedKeys(op.Results) {
			if !regs[r] {
				c.add("operation", doc, "has a result from registry %s, which it does not include", r)
			}
		}
	}
	if id := c.s.CurrentOperation; id != "" {
		if _, ok := c.s.Operations[id]; !ok {
			c.add("operation", "meta/bootstrap", "names operation %s, which is not stored", id)
		}
	}
}

func (c *checker) secrets() {
	var canaries []string
	for _, k := range c.opts.Canaries {
		if k != "" {
			canaries = append(canaries, k)
		}
	}
	if len(canaries) == 0 {
		return
	}
	for _, path := range sortedKeys(c.s.Raw) {
		found := map[string]bool{}
		scan(path, canaries, found)
		scanValue(c.s.Raw[path], canaries, found)
		shown := path
		for _, k := range canaries {
			shown = strings.ReplaceAll(shown, k, mask(k))
		}
		for _, k := range canaries {
			if found[k] {
				c.add("secret", shown, "holds canary %s", mask(k))
			}
		}
	}
}

func scan(s string, canaries []string, found map[string]bool) {
	for _, k := range canaries {
		if strings.Contains(s, k) {
			found[k] = true
		}
	}
}

func scanValue(v any, canaries []string, found map[string]bool) {
	switch x := v.(type) {
	case string:
		scan(x, canaries, found)
	case []byte:
		scan(string(x), canaries, found)
	case map[string]any:
		for k, e := range x {
			scan(k, canaries, found)
			scanValue(e, canaries, found)
		}
	case []any:
		for _, e := range x {
			scanValue(e, canaries, found)
		}
	case *firestore.DocumentRef:
		if x != nil {
			scan(x.Path, canaries, found)
		}
	}
}

// mask names a canary without repeating it whole in a test log.
func mask(k string) string {
	if len(k) <= 4 {
		return "****"
	}
	return k[:2] + strings.Repeat("*", len(k)-4) + k[len(k)-2:]
}

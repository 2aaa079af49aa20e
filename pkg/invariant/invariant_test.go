package invariant_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/store"
)

const canary = "canary-s3cr3t-7f1d2c"

func specYAML(name string) string {
	return fmt.Sprintf("name: %s\ndescription: the %s service\nbindable: true\nplans:\n  - name: small\n    description: small\n  - name: large\n    description: large\n", name, name)
}

// world is a healthy project: two registries reconciled (one spec marked),
// an instance on a spec with a binding, the tombstone of a deprovisioned
// instance, a finished operation.
type world struct {
	client *firestore.Client
	st     *store.Store
	// ids by spec name
	ids   map[string]string
	plans map[string][]string
	op    string // the finished operation
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	client, _ := emulatortest.FirestoreProject(t)
	st := store.New(client)
	runner := &reconcile.Runner{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	fsys := fstest.MapFS{}
	for _, n := range []string{"postgres", "redis", "kafka"} {
		fsys[n+".yaml"] = &fstest.MapFile{Data: []byte(specYAML(n))}
	}
	src, err := registry.NewDir(registry.DirConfig{FS: fsys, Root: "test:team"})
	if err != nil {
		t.Fatal(err)
	}
	reg := reconcile.Registry{Name: "team", Source: src, Policy: reconcile.Policy{MaxMarkShare: 0.5}}
	if _, err := runner.Reconcile(ctx, reg); err != nil {
		t.Fatal(err)
	}
	w := &world{client: client, st: st, ids: map[string]string{}, plans: map[string][]string{}}
	recs, err := st.OwnedSpecs(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		w.ids[r.Name] = r.ID
		sp, err := r.Spec()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range sp.Plans {
			w.plans[r.Name] = append(w.plans[r.Name], p.ID)
		}
	}
	if _, err := st.CreateInstance(ctx, store.Instance{ID: "inst-1", SpecID: w.ids["redis"], PlanID: w.plans["redis"][0]}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateBinding(ctx, store.Binding{ID: "bind-1", InstanceID: "inst-1", SpecID: w.ids["redis"], PlanID: w.plans["redis"][0]}); err != nil {
		t.Fatal(err)
	}
	// A deprovisioned instance (with a binding it took along) leaves a
	// tombstone.
	if _, err := st.CreateInstance(ctx, store.Instance{ID: "inst-gone", SpecID: w.ids["postgres"], PlanID: w.plans["postgres"][0]}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateBinding(ctx, store.Binding{ID: "bind-gone", InstanceID: "inst-gone", SpecID: w.ids["postgres"], PlanID: w.plans["postgres"][0]}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteInstance(ctx, "inst-gone"); err != nil {
		t.Fatal(err)
	}
	delete(fsys, "kafka.yaml")
	if run, err := runner.Reconcile(ctx, reg); err != nil || run.Counts.Marked != 1 {
		t.Fatalf("second run: %+v, %v", run.Counts, err)
	}
	if _, err := (&reconcile.Committer{Store: st}).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ops := bootstrap.NewOperations(store.New(client), time.Hour, time.Hour)
	op, _, err := ops.Start(ctx, []string{"team"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Report(ctx, op.ID, "team", api.RegistryResult{State: api.Succeeded, Result: api.ResultSucceeded}); err != nil {
		t.Fatal(err)
	}
	rev, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Committed(ctx, op.ID, rev); err != nil {
		t.Fatal(err)
	}
	w.op = op.ID
	return w
}

func (w *world) doc(path string) *firestore.DocumentRef { return w.client.Doc(path) }

func (w *world) set(t *testing.T, path string, data any) {
	t.Helper()
	if _, err := w.doc(path).Set(context.Background(), data); err != nil {
		t.Fatal(err)
	}
}

func (w *world) update(t *testing.T, path string, us ...firestore.Update) {
	t.Helper()
	if _, err := w.doc(path).Update(context.Background(), us); err != nil {
		t.Fatal(err)
	}
}

func (w *world) spec(t *testing.T, name string) store.SpecRecord {
	t.Helper()
	r, err := w.st.GetSpec(context.Background(), w.ids[name])
	if err != nil {
		t.Fatal(err)
	}
	return *r
}

func check(t *testing.T, w *world, opts invariant.Options) []invariant.Violation {
	t.Helper()
	_, vs, err := invariant.Check(context.Background(), w.client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

var strict = invariant.Options{Canaries: []string{canary}, Settled: true}

// The healthy world passes, so every violation below is the seeded one.
func TestHealthyWorldPasses(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	st := invariant.Require(t, w.client, strict)
	if len(st.Specs) != 3 || len(st.Instances) != 1 || len(st.Operations) != 1 || len(st.Registries) != 1 || len(st.Bindings) != 1 || len(st.Tombstones) != 1 {
		t.Fatalf("the checker did not read the whole project: %d specs, %d instances, %d bindings, %d tombstones, %d operations, %d registries",
			len(st.Specs), len(st.Instances), len(st.Bindings), len(st.Tombstones), len(st.Operations), len(st.Registries))
	}
	// A second look with the first as the previous snapshot: ids kept.
	invariant.Require(t, w.client, invariant.Options{Settled: true, Previous: st})
}

// Each case writes one bad document straight to Firestore and expects the
// checker to name the rule and the document.
func TestCheckerDetectsSeededViolations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		rule string
		doc  string // substring of Violation.Doc ("" for any)
		opts *invariant.Options
		seed func(t *testing.T, w *world) string // returns the doc substring when dynamic
	}{
		{name: "instance of a missing spec", rule: "instance-spec", doc: "instances/orphan",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "instances/orphan", store.Instance{ID: "orphan", SpecID: "deleted-spec", PlanID: "p"})
				return ""
			}},
		{name: "referenced spec deleted", rule: "instance-spec", doc: "instances/inst-1",
			seed: func(t *testing.T, w *world) string {
				if _, err := w.doc("specs/" + w.ids["redis"]).Delete(context.Background()); err != nil {
					t.Fatal(err)
				}
				return ""
			}},
		{name: "instance id field", rule: "instance-id", doc: "instances/inst-1",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "instances/inst-1", firestore.Update{Path: "id", Value: "inst-2"})
				return ""
			}},
		{name: "binding of a missing instance", rule: "binding-instance", doc: "instances/ghost/bindings/b1",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "instances/ghost/bindings/b1", store.Binding{ID: "b1", InstanceID: "ghost", SpecID: w.ids["redis"], PlanID: w.plans["redis"][0]})
				return ""
			}},
		{name: "instance deleted without its bindings", rule: "binding-instance", doc: "instances/inst-1/bindings/bind-1",
			seed: func(t *testing.T, w *world) string {
				if _, err := w.doc("instances/inst-1").Delete(context.Background()); err != nil {
					t.Fatal(err)
				}
				return ""
			}},
		{name: "binding instance_id field", rule: "binding-id", doc: "instances/inst-1/bindings/bind-1",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "instances/inst-1/bindings/bind-1", firestore.Update{Path: "instance_id", Value: "inst-2"})
				return ""
			}},
		{name: "binding of another service", rule: "binding-spec", doc: "instances/inst-1/bindings/bind-1",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "instances/inst-1/bindings/bind-1", firestore.Update{Path: "spec_id", Value: w.ids["postgres"]})
				return ""
			}},
		{name: "tombstone under another id", rule: "tombstone", doc: "tombstones/instance:inst-gone",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "tombstones/instance:inst-gone", firestore.Update{Path: "instance_id", Value: "other"})
				return ""
			}},
		{name: "spec stored under another id", rule: "spec-id", doc: "specs/copied",
			seed: func(t *testing.T, w *world) string {
				r := w.spec(t, "postgres")
				r.Registry = "other"
				w.set(t, "specs/copied", r)
				return ""
			}},
		{name: "spec id changed under its plans", rule: "spec-id",
			seed: func(t *testing.T, w *world) string {
				r := w.spec(t, "postgres")
				sp, _ := r.Spec()
				sp.ID = "00000000-0000-0000-0000-000000000001"
				r.ID = sp.ID
				r.SpecJSON = mustJSON(t, sp)
				w.set(t, "specs/"+r.ID, r)
				return "specs/" + r.ID
			}},
		{name: "digest not of the stored spec", rule: "spec-body",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "specs/"+w.ids["postgres"], firestore.Update{Path: "digest", Value: "sha256:00"})
				return "specs/" + w.ids["postgres"]
			}},
		{name: "stored spec does not decode", rule: "spec-body",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "specs/"+w.ids["postgres"], firestore.Update{Path: "spec", Value: "{not json"})
				return "specs/" + w.ids["postgres"]
			}},
		{name: "marked without marked_run", rule: "spec-state",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "specs/"+w.ids["kafka"], firestore.Update{Path: "marked_run", Value: firestore.Delete})
				return "specs/" + w.ids["kafka"]
			}},
		{name: "unknown state", rule: "spec-state",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "specs/"+w.ids["postgres"], firestore.Update{Path: "state", Value: "deleting"})
				return "specs/" + w.ids["postgres"]
			}},
		{name: "spec without a generation", rule: "spec-generation",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "specs/"+w.ids["postgres"], firestore.Update{Path: "generation", Value: 0})
				return "specs/" + w.ids["postgres"]
			}},
		{name: "spec changed behind the feed", rule: "feed-truth",
			seed: func(t *testing.T, w *world) string {
				r := w.spec(t, "postgres")
				sp, _ := r.Spec()
				sp.Description = "changed without a change record"
				w.update(t, "specs/"+r.ID, firestore.Update{Path: "spec", Value: mustJSON(t, sp)}, firestore.Update{Path: "digest", Value: spec.Digest(sp)})
				return "specs/" + r.ID
			}},
		{name: "a change lost from the feed", rule: "feed-dense",
			seed: func(t *testing.T, w *world) string {
				docs, err := w.client.Collection("changes").Where("revision", "==", 2).Documents(context.Background()).GetAll()
				if err != nil || len(docs) != 1 {
					t.Fatalf("revision 2: %d docs, %v", len(docs), err)
				}
				if _, err := docs[0].Ref.Delete(context.Background()); err != nil {
					t.Fatal(err)
				}
				return ""
			}},
		{name: "registry marked count", rule: "registry-marked", doc: "registries/team",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "registries/team", firestore.Update{Path: "marked", Value: 0})
				return ""
			}},
		{name: "revision gap", rule: "feed-dense",
			seed: func(t *testing.T, w *world) string {
				seedFeed(t, w, 1, 2, 4)
				return ""
			}},
		{name: "duplicate revision", rule: "feed-dense",
			seed: func(t *testing.T, w *world) string {
				seedFeed(t, w, 1, 2, 2, 3)
				return ""
			}},
		{name: "catalog revision behind the feed", rule: "feed-dense", doc: "meta/catalog",
			seed: func(t *testing.T, w *world) string {
				seedFeed(t, w, 1, 2, 3)
				w.set(t, "meta/catalog", map[string]any{"revision": 2})
				return ""
			}},
		{name: "revision without change records", rule: "feed-dense", doc: "meta/catalog",
			opts: &invariant.Options{Feed: true},
			seed: func(t *testing.T, w *world) string { clearFeed(t, w); return "" }},
		{name: "pending change after the run", rule: "feed-pending", doc: "changes/pending",
			seed: func(t *testing.T, w *world) string {
				seedFeed(t, w, 1, 2, 3)
				now := time.Now()
				w.set(t, "changes/pending", store.Change{Kind: api.ChangeCreated, SpecID: w.ids["postgres"], Registry: "team", PendingAt: now, At: now})
				return ""
			}},
		{name: "pending change the committer cannot select", rule: "feed-pending", doc: "changes/lost",
			opts: &invariant.Options{},
			seed: func(t *testing.T, w *world) string {
				seedFeed(t, w, 1, 2, 3)
				w.set(t, "changes/lost", store.Change{Kind: api.ChangeCreated, SpecID: w.ids["postgres"], Registry: "team", At: time.Now()})
				return ""
			}},
		{name: "committed change still marked pending", rule: "feed-pending", doc: "changes/c2-3",
			opts: &invariant.Options{},
			seed: func(t *testing.T, w *world) string {
				seedFeed(t, w, 1, 2, 3)
				w.update(t, "changes/c2-3", firestore.Update{Path: "pending_at", Value: time.Now()})
				return ""
			}},
		{name: "feed says deleted, spec stored", rule: "feed-truth",
			seed: func(t *testing.T, w *world) string {
				seedFeed(t, w, 1, 2, 3)
				w.set(t, "changes/c4", store.Change{Revision: 4, Kind: api.ChangeDeleted, SpecID: w.ids["postgres"], Registry: "team", At: time.Now()})
				w.set(t, "meta/catalog", map[string]any{"revision": 4})
				return "specs/" + w.ids["postgres"]
			}},
		{name: "feed says in catalog, spec marked", rule: "feed-truth",
			seed: func(t *testing.T, w *world) string {
				seedFeed(t, w, 1, 2, 3)
				k := w.spec(t, "kafka")
				w.set(t, "changes/c4", store.Change{Revision: 4, Kind: api.ChangeUnmarked, SpecID: k.ID, Registry: "team", SpecJSON: k.SpecJSON, At: time.Now()})
				w.set(t, "meta/catalog", map[string]any{"revision": 4})
				return "specs/" + k.ID
			}},
		{name: "operation succeeded without every registry", rule: "operation",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "operations/op-x", api.Operation{ID: "op-x", State: api.Succeeded, Registries: []string{"team", "other"},
					Results: map[string]api.RegistryResult{"team": {State: api.Succeeded}}})
				return "operations/op-x"
			}},
		{name: "trusted manifest misses a spec", rule: "manifest", doc: "registries/team",
			seed: func(t *testing.T, w *world) string {
				r := w.spec(t, "postgres")
				r.ID, r.Name = "99999999-0000-4000-8000-000000000000", "extra"
				sp, _ := r.Spec()
				sp.ID, sp.Name = r.ID, r.Name
				for i := range sp.Plans {
					sp.Plans[i].ID = spec.DerivePlanID(r.ID, sp.Plans[i].Name)
				}
				r.SpecJSON = mustJSON(t, sp)
				r.Digest = digestOf(t, r)
				w.set(t, "specs/"+r.ID, r)
				return ""
			}},
		{name: "trusted manifest with a stale digest", rule: "manifest", doc: "registries/team",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "specs/"+w.ids["redis"], firestore.Update{Path: "entry_error", Value: "broken since"})
				return ""
			}},
		{name: "trusted manifest whose shard is another run's", rule: "manifest", doc: "manifests/team.0",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "manifests/team.0", firestore.Update{Path: "run", Value: "someone-else"})
				return ""
			}},
		{name: "trusted manifest hints a spec under another name", rule: "manifest", doc: "registries/team",
			seed: func(t *testing.T, w *world) string {
				r := w.spec(t, "redis")
				snap, err := w.client.Doc("manifests/team.0").Get(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				var sh store.ManifestShard
				if err := snap.DataTo(&sh); err != nil {
					t.Fatal(err)
				}
				m, err := sh.Decode()
				if err != nil {
					t.Fatal(err)
				}
				p := m.Listing[r.Entry]
				if p.Digest == "" {
					t.Fatalf("no listing part of %s in %+v", r.Entry, m.Listing)
				}
				p.Upstream, p.Spec = "oci1@sha256:"+strings.Repeat("0", 64), "not-"+r.Name
				m.Listing[r.Entry] = p
				w.update(t, "manifests/team.0", firestore.Update{Path: "listing", Value: []byte(mustJSON(t, m.Listing))})
				return ""
			}},
		{name: "operation succeeded before its commit", rule: "operation",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "operations/"+w.op, firestore.Update{Path: "catalog_revision", Value: firestore.Delete})
				return "operations/" + w.op
			}},
		{name: "operation names a revision the catalog has not reached", rule: "operation",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "operations/"+w.op, firestore.Update{Path: "catalog_revision", Value: 99})
				return "operations/" + w.op
			}},
		{name: "operation awaits a commit with a registry missing", rule: "operation",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "operations/op-z", api.Operation{ID: "op-z", State: api.InProgress, Registries: []string{"team", "other"},
					Results: map[string]api.RegistryResult{"team": {State: api.Succeeded}}, Commit: &api.OperationCommit{Changes: 1}})
				return "operations/op-z"
			}},
		{name: "dry run with a catalog revision", rule: "operation",
			seed: func(t *testing.T, w *world) string {
				rev := int64(1)
				w.set(t, "operations/op-d", api.Operation{ID: "op-d", State: api.Succeeded, DryRun: true, Registries: []string{"team"},
					Results: map[string]api.RegistryResult{"team": {State: api.Succeeded}}, CatalogRevision: &rev})
				return "operations/op-d"
			}},
		{name: "operation state", rule: "operation",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "operations/op-y", api.Operation{ID: "op-y", State: "done", Registries: []string{"team"}})
				return "operations/op-y"
			}},
		{name: "current operation missing", rule: "operation", doc: "meta/bootstrap",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "meta/bootstrap", map[string]any{"operation": "gone"})
				return ""
			}},
		{name: "secret in a status error", rule: "secret", doc: "registries/team",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "registries/team", firestore.Update{Path: "last_run.error", Value: "GET https://user:" + canary + "@host/v2/: 401"})
				return ""
			}},
		{name: "secret in a nested list", rule: "secret", doc: "operations/op-s",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "operations/op-s", map[string]any{"state": api.Failed, "results": map[string]any{},
					"notes": []any{map[string]any{"x": []any{"Bearer " + canary}}}})
				return ""
			}},
		{name: "secret as a field name", rule: "secret", doc: "meta/odd",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "meta/odd", map[string]any{"tokens": map[string]any{canary: true}})
				return ""
			}},
		{name: "secret in a document id of another collection", rule: "secret", doc: "leaks/",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "leaks/"+canary, map[string]any{"a": 1})
				return ""
			}},
		{name: "secret in a subcollection", rule: "secret", doc: "registries/team/history/h1",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "registries/team/history/h1", map[string]any{"error": canary})
				return ""
			}},
		// The Firestore client stores a json.RawMessage (a named []byte)
		// as an array of integers: parameters kept by mistake look so.
		{name: "secret in a json.RawMessage", rule: "secret", doc: "instances/raw",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "instances/raw", struct {
					Parameters json.RawMessage `firestore:"parameters"`
				}{json.RawMessage(`{"password":"` + canary + `"}`)})
				return ""
			}},
		{name: "secret base64-encoded", rule: "secret", doc: "operations/op-b",
			seed: func(t *testing.T, w *world) string {
				w.set(t, "operations/op-b", map[string]any{"state": api.Failed, "results": map[string]any{},
					"auth": base64.StdEncoding.EncodeToString([]byte("user:" + canary))})
				return ""
			}},
		{name: "secret in a JSON text with escapes", rule: "secret", doc: "meta/json",
			seed: func(t *testing.T, w *world) string {
				escaped := strings.ReplaceAll(strings.ReplaceAll(fmt.Sprintf("%q", canary), "-", `\u002d`), "s", `\u0073`)
				w.set(t, "meta/json", map[string]any{"context_json": `{"token":` + escaped + `}`})
				return ""
			}},
		{name: "document that does not decode", rule: "decode",
			seed: func(t *testing.T, w *world) string {
				w.update(t, "specs/"+w.ids["postgres"], firestore.Update{Path: "generation", Value: "many"})
				return "specs/" + w.ids["postgres"]
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			doc := tc.seed(t, w)
			if doc == "" {
				doc = tc.doc
			}
			opts := strict
			if tc.opts != nil {
				opts = *tc.opts
			}
			vs := check(t, w, opts)
			for _, v := range vs {
				if v.Rule == tc.rule && strings.Contains(v.Doc, doc) {
					if v.Rule == "secret" && strings.Contains(v.String(), canary) {
						t.Fatalf("the violation repeats the secret: %s", v)
					}
					return
				}
			}
			t.Fatalf("seeded a %s violation on %q; the checker reported %v", tc.rule, doc, vs)
		})
	}
}

// An id that changed between two snapshots is a violation even when each
// snapshot is consistent by itself.
func TestCheckerDetectsChangedID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	before := invariant.Require(t, w.client, strict)
	r := w.spec(t, "postgres")
	sp, _ := r.Spec()
	// Re-derive every id from a new spec id, as a buggy derivation would:
	// consistent in itself, but a new service to the platforms.
	sp.ID = "11111111-2222-3333-4444-555555555555"
	for i := range sp.Plans {
		sp.Plans[i].ID = ""
	}
	sp.Plans[0].ID, sp.Plans[1].ID = "p-small", "p-large"
	r.ID, r.SpecJSON = sp.ID, mustJSON(t, sp)
	r.Digest = digestOf(t, r)
	if _, err := w.doc("specs/" + w.ids["postgres"]).Delete(ctx); err != nil {
		t.Fatal(err)
	}
	w.set(t, "specs/"+r.ID, r)
	// Whatever rewrote the spec wrote the registry's specs: the manifest
	// no longer describes them (the manifest rule would give it away
	// otherwise).
	w.update(t, "registries/team", firestore.Update{Path: "writer", Value: "the-buggy-run"})
	// The feed would give it away (feed-truth); without it only the
	// earlier snapshot can.
	clearFeed(t, w)
	if vs := check(t, w, strict); len(vs) != 0 {
		t.Fatalf("the new state is consistent by itself, yet: %v", vs)
	}
	opts := strict
	opts.Previous = before
	vs := check(t, w, opts)
	if len(vs) != 1 || vs[0].Rule != "spec-stable" {
		t.Fatalf("want one spec-stable violation, got %v", vs)
	}
}

// clearFeed deletes every change record.
func clearFeed(t *testing.T, w *world) {
	t.Helper()
	ctx := context.Background()
	refs, err := w.client.Collection("changes").DocumentRefs(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		if _, err := ref.Delete(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// seedFeed replaces the feed by committed changes with the given
// revisions (for the stored specs in turn, each true to the store) and
// moves meta/catalog to the highest.
func seedFeed(t *testing.T, w *world, revs ...int64) {
	t.Helper()
	clearFeed(t, w)
	recs, err := w.st.OwnedSpecs(context.Background(), "team")
	if err != nil {
		t.Fatal(err)
	}
	top := int64(0)
	for i, rev := range revs {
		r := recs[i%len(recs)]
		c := store.Change{Revision: rev, Kind: api.ChangeCreated, SpecID: r.ID, Registry: "team", Name: r.Name, SpecJSON: r.SpecJSON, Generation: r.Generation, At: time.Now()}
		if r.State == api.SpecMarked {
			c.Kind, c.SpecJSON, c.Generation = api.ChangeMarked, "", 0
		}
		w.set(t, fmt.Sprintf("changes/c%d-%d", i, rev), c)
		top = max(top, rev)
	}
	w.set(t, "meta/catalog", map[string]any{"revision": top})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func digestOf(t *testing.T, r store.SpecRecord) string {
	t.Helper()
	sp, err := r.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return spec.Digest(sp)
}

// endRecorder is a test that records what is asked of it at its end:
// its cleanups, run when the caller says, and the errors they report.
type endRecorder struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (r *endRecorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *endRecorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *endRecorder) Failed() bool { return len(r.errors) > 0 }
func (r *endRecorder) Helper()      {}

func (r *endRecorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// An environment's end check fails a test that ends in a violating
// state, names the rule, and lets a test that means to leave it so opt
// out (with its reason); one that ends unsettled on purpose is checked
// against the rules of every instant only.
func TestCheckAtEnd(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rec := &endRecorder{TB: t}
	invariant.CheckAtEnd(rec, w.client, invariant.Options{Settled: true})
	rec.end()
	if len(rec.errors) != 0 {
		t.Fatalf("a healthy world failed its end check: %v", rec.errors)
	}

	w.set(t, "instances/orphan", store.Instance{ID: "orphan", SpecID: "deleted-spec", PlanID: "p"})
	rec = &endRecorder{TB: t}
	invariant.CheckAtEnd(rec, w.client, invariant.Options{})
	rec.end()
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "instance-spec: instances/orphan") {
		t.Fatalf("the end check of a violating world reported %q, want the instance-spec violation", rec.errors)
	}

	rec = &endRecorder{TB: t}
	invariant.CheckAtEnd(rec, w.client, invariant.Options{}).Skip("the orphan instance is what this test seeds")
	rec.end()
	if len(rec.errors) != 0 {
		t.Fatalf("a skipped end check reported %q", rec.errors)
	}

	// A pending change breaks only a settled check.
	if _, err := w.doc("instances/orphan").Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.set(t, "changes/waiting", map[string]any{"kind": "created", "spec_id": w.ids["redis"], "registry": "team", "name": "redis", "at": time.Now(), "pending_at": time.Now()})
	rec = &endRecorder{TB: t}
	invariant.CheckAtEnd(rec, w.client, invariant.Options{Settled: true})
	rec.end()
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "feed-pending: changes/waiting") {
		t.Fatalf("the settled end check with a change pending reported %q, want feed-pending", rec.errors)
	}
	rec = &endRecorder{TB: t}
	invariant.CheckAtEnd(rec, w.client, invariant.Options{Settled: true}).Unsettled("a change is left pending on purpose")
	rec.end()
	if len(rec.errors) != 0 {
		t.Fatalf("an unsettled end check reported %q", rec.errors)
	}
}

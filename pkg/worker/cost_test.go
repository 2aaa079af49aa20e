package worker_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"google.golang.org/grpc"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/store"
)

// The cost model of a bootstrap (docs/deploy.md#cost), counted on
// the wire from every Firestore call the bootstrap, the reconcile runs,
// the reports and the committer make, exactly:
//
//   - an unchanged world of N registries: 7 + 3N reads and 3 + N writes
//     (start: 2 plain reads and a transaction of 2 reads and 2 writes;
//     each registry: the operation, its status, its report's 1 read and 1
//     write, recorded by the committer; after the last report, in the
//     same handler: the empty pending query, meta/catalog, the
//     operation's 1 read and 1 write: the same as when each run wrote
//     its own report);
//   - one spec changed in one of them: 7 more reads, 8 more writes (its
//     run: lease 1 and 1, manifest shard 1, the spec 1, the spec and its
//     change 2 writes, the record 1 read and 2 writes (status, shard),
//     the lease's release 1 and 1, where the unchanged run read its status
//     only; its commit request: the pending change 1, meta/catalog 1, the
//     change's revision and meta/catalog 2 writes; the last report's commit
//     then finds nothing pending, as before).
func TestBootstrapCostModel(t *testing.T) {
	ctx := context.Background()
	_, project, _ := checkedProject(t)
	bill := &emulatortest.Billing{}
	client := emulatortest.FirestoreVia(t, project, "", bill.Unary, grpc.WithStreamInterceptor(bill.Stream))
	st := store.New(client)
	const n = 3
	regs, names, files := dirRegistries(t, n, 4)
	ops := bootstrap.NewOperations(st, 10*time.Minute, time.Hour)
	w := newWorker(st, ops, regs)
	pub := &countingPublisher{}
	svc := &bootstrap.Service{Operations: ops, Publisher: pub, Registries: names,
		VerifyAdmin: func(*http.Request, string) bool { return true }, Logger: quiet}
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	bootstrapOnce := func() string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/bootstrap", nil)
		req.Header.Set("Authorization", "Bearer x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST /bootstrap: %v %v", resp, err)
		}
		resp.Body.Close()
		msgs := pub.msgs
		pub.msgs = nil
		for _, m := range msgs {
			if err := w.Handle(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		deliverCommits(t, w)
		return msgs[0].Operation
	}
	finished := func(id string) *api.Operation {
		t.Helper()
		op, err := ops.Get(ctx, id)
		if err != nil || op.State != api.Succeeded {
			t.Fatalf("operation %+v %v", op, err)
		}
		return op
	}
	measure := func(f func()) (reads, writes, deletes int64) {
		r0, w0, d0 := bill.Counts()
		f()
		r1, w1, d1 := bill.Counts()
		return r1 - r0, w1 - w0, d1 - d0
	}

	finished(bootstrapOnce()) // the first import
	finished(bootstrapOnce()) // and one with nothing to delete, mark or commit left
	var id string
	r, wr, d := measure(func() { id = bootstrapOnce() })
	finished(id)
	want := emulatortest.UnchangedBootstrap(n)
	if r != want.Reads || wr != want.Writes || d != 0 {
		t.Errorf("an unchanged bootstrap of %d registries: %d reads, %d writes, %d deletes; want %d, %d, 0", n, r, wr, d, want.Reads, want.Writes)
	}
	files[1]["svc-001-002.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(string(files[1]["svc-001-002.yaml"].Data), "description: d", "description: changed", 1))}
	r, wr, d = measure(func() { id = bootstrapOnce() })
	op := finished(id)
	// The changed spec costs its run the spec's read and the query that
	// counts its instances (what hold-back reads), the commit 2 reads.
	want = emulatortest.Sum(want, emulatortest.BootstrapOneSpecChanged)
	if r != want.Reads || wr != want.Writes || d != 0 {
		t.Errorf("a bootstrap with one spec changed: %d reads, %d writes, %d deletes; want %d, %d, 0", r, wr, d, want.Reads, want.Writes)
	}
	if op.CatalogRevision == nil || *op.CatalogRevision != 4*n+1 {
		t.Errorf("the operation names catalog revision %v, want %d", op.CatalogRevision, 4*n+1)
	}
}

// dirRegistries is n dir registries reg-000... of each specs svc-R-I, with
// their names in order and the files a test edits between runs.
func dirRegistries(t *testing.T, n, each int) (map[string]reconcile.Registry, []string, []fstest.MapFS) {
	t.Helper()
	regs := map[string]reconcile.Registry{}
	var names []string
	var files []fstest.MapFS
	for r := range n {
		name := fmt.Sprintf("reg-%03d", r)
		fsys := fstest.MapFS{}
		for i := range each {
			s := fmt.Sprintf("svc-%03d-%03d", r, i)
			fsys[s+".yaml"] = &fstest.MapFile{Data: []byte("name: " + s + "\ndescription: d\nplans:\n  - name: p\n    description: p\n")}
		}
		src, err := registry.NewDir(registry.DirConfig{FS: fsys, Root: "test:" + name})
		if err != nil {
			t.Fatal(err)
		}
		regs[name] = reconcile.Registry{Name: name, Source: src, Policy: reconcile.Policy{MaxMarkShare: 0.5}}
		names = append(names, name)
		files = append(files, fsys)
	}
	return regs, names, files
}

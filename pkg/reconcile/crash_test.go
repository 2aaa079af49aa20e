package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/store"
)

// crashAfter is a Firestore client on the emulator whose gRPC connection
// lets `limit` Commit calls through (every write of the store is one
// commit: a transaction or a single write) and fails every later one, as
// if the process had died after its k-th write. limit < 0 never fails;
// commits counts the commits attempted.
type crashConn struct {
	limit   atomic.Int64
	commits atomic.Int64
}

func crashClient(t *testing.T, project string, cc *crashConn) *firestore.Client {
	t.Helper()
	return emulatortest.FirestoreVia(t, project, "", func(ctx context.Context, method string, req, reply any, conn *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/Commit") {
			n := cc.commits.Add(1)
			if l := cc.limit.Load(); l >= 0 && n > l {
				return grpcstatus.Error(codes.Internal, "injected crash: the process died")
			}
		}
		return invoker(ctx, method, req, reply, conn, opts...)
	})
}

// crashWorld is the state before the run under test: five specs, one of
// them (delta) marked by an earlier run and unreferenced, one (beta) with
// an instance. The run under test updates beta, marks gamma, deletes
// delta and creates echo.
func crashWorld(t *testing.T, client *firestore.Client) (fstest.MapFS, reconcile.Registry) {
	t.Helper()
	ctx := context.Background()
	fsys := specFiles("alpha", "beta", "gamma", "delta", "zeta")
	reg := dirRegistry(t, "local", fsys, defaultPolicy)
	st := store.New(client)
	runner := &reconcile.Runner{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := runner.Reconcile(ctx, reg); err != nil {
		t.Fatal(err)
	}
	recs, err := st.OwnedSpecs(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Name == "beta" {
			sp, _ := r.Spec()
			if _, err := st.CreateInstance(ctx, store.Instance{ID: "inst-beta", SpecID: r.ID, PlanID: sp.Plans[0].ID}); err != nil {
				t.Fatal(err)
			}
		}
	}
	delete(fsys, "delta.yaml")
	if run, err := runner.Reconcile(ctx, reg); err != nil || run.Counts.Marked != 1 {
		t.Fatalf("setup run: %+v %v", run.Counts, err)
	}
	// The change the run under test applies.
	fsys["beta.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(specYAML("beta"), "the beta service", "the new beta service", 1))}
	delete(fsys, "gamma.yaml")
	fsys["echo.yaml"] = &fstest.MapFile{Data: []byte(specYAML("echo"))}
	return fsys, reg
}

// outcome is the part of a project's state a run decides: which specs
// exist, in which state, with which content and usage; the instances;
// what the feed says about each spec last.
func outcome(t *testing.T, client *firestore.Client) string {
	t.Helper()
	st, err := invariant.Read(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for id, r := range st.Specs {
		lines = append(lines, fmt.Sprintf("spec %s %s %s %s gen=%d inst=%d plans=%v err=%q", id, r.Name, r.State, r.Digest, r.Generation, r.Instances, r.PlanInstances, r.EntryError))
	}
	for id, i := range st.Instances {
		lines = append(lines, fmt.Sprintf("instance %s %s %s", id, i.SpecID, i.PlanID))
	}
	last := map[string]store.Change{}
	for _, c := range st.Changes {
		if c.Revision > last[c.SpecID].Revision {
			last[c.SpecID] = c.Change
		}
	}
	for id, c := range last {
		lines = append(lines, fmt.Sprintf("feed %s %s gen=%d", id, c.Kind, c.Generation))
	}
	reg := st.Registries["local"]
	lines = append(lines, fmt.Sprintf("registry marked=%d result=%s", reg.Marked, reg.LastRun.Result))
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Crashes: the run under test dies after its k-th write, for every k the
// run has (the injection is a gRPC interceptor on a real client: no store
// hook); the next run converges to a state uninterrupted runs produce,
// one more run to exactly the state of two uninterrupted runs, and every
// intermediate state passes the checker.
func TestCrashAfterEveryWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	// The reference: the run uninterrupted, counting its commits.
	refClient, refProject := emulatortest.FirestoreProject(t)
	_, reg := crashWorld(t, refClient)
	counter := &crashConn{}
	counter.limit.Store(-1)
	counting := crashClient(t, refProject, counter)
	run, err := (&reconcile.Runner{Store: store.New(counting), Logger: logger}).Reconcile(ctx, reg)
	if err != nil || run.Result != reconcile.ResultSucceeded {
		t.Fatalf("uninterrupted run: %s %v", run.Result, err)
	}
	if run.Counts.Updated != 1 || run.Counts.Marked != 1 || run.Counts.Deleted != 1 || run.Counts.Created != 1 {
		t.Fatalf("uninterrupted run did not do all four kinds of work: %+v", run.Counts)
	}
	writes := counter.commits.Load()
	want1 := outcome(t, refClient)
	invariant.Require(t, refClient, invariant.Options{Settled: true, Feed: true})
	// And the run after it: it deletes what the first marked.
	if run, err := (&reconcile.Runner{Store: store.New(refClient), Logger: logger}).Reconcile(ctx, reg); err != nil || run.Counts.Deleted != 1 {
		t.Fatalf("second uninterrupted run: %+v %v", run.Counts, err)
	}
	want2 := outcome(t, refClient)
	if writes < 5 {
		t.Fatalf("the run committed %d times; the test would not test much", writes)
	}

	for k := int64(0); k < writes; k++ {
		t.Run(fmt.Sprintf("crash after write %d of %d", k, writes), func(t *testing.T) {
			t.Parallel()
			client, project := emulatortest.FirestoreProject(t)
			_, reg := crashWorld(t, client)
			cc := &crashConn{}
			cc.limit.Store(k)
			crashing := crashClient(t, project, cc)
			run, err := (&reconcile.Runner{Store: store.New(crashing), Logger: logger}).Reconcile(ctx, reg)
			if err == nil && run.Result == reconcile.ResultSucceeded {
				t.Fatalf("the run survived a crash after write %d", k)
			}
			// Right after the crash nothing is settled, but nothing is
			// broken either.
			invariant.Require(t, client, invariant.Options{})
			next, err := (&reconcile.Runner{Store: store.New(client), Logger: logger}).Reconcile(ctx, reg)
			if err != nil {
				t.Fatalf("the run after the crash: %v", err)
			}
			if next.Result != reconcile.ResultSucceeded {
				t.Fatalf("the run after the crash: %s (%s)", next.Result, next.Error)
			}
			invariant.Require(t, client, invariant.Options{Settled: true, Feed: true})
			// A crashed run's marks do not count as an earlier run
			// (DeleteMarked's markedBefore): the recovery run ends
			// exactly where one uninterrupted run would have.
			if got := outcome(t, client); got != want1 {
				t.Fatalf("after a crash after write %d the next run converged to\n%s\nwant the uninterrupted run's\n%s", k, got, want1)
			}
			if _, err := (&reconcile.Runner{Store: store.New(client), Logger: logger}).Reconcile(ctx, reg); err != nil {
				t.Fatal(err)
			}
			invariant.Require(t, client, invariant.Options{Settled: true, Feed: true})
			if got := outcome(t, client); got != want2 {
				t.Fatalf("one more run after the recovery: \n%s\nwant two uninterrupted runs'\n%s", got, want2)
			}
		})
	}
}

package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/store"
)

// WatchRevision hears the revision as the listen starts (0 before any
// change), then after each commit, once per write of meta/catalog
// however many changes it numbered, each snapshot one read; it returns
// ctx's error when ctx ends.
func TestWatchRevisionHearsEachCommit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := store.New(checked(t))
	ops := &store.Ops{}
	heard := make(chan int64, 16)
	done := make(chan error, 1)
	go func() { done <- st.WithOps(ops).WatchRevision(ctx, func(rev int64) { heard <- rev }) }()
	want := func(rev int64) {
		t.Helper()
		select {
		case got := <-heard:
			if got != rev {
				t.Fatalf("heard revision %d, want %d", got, rev)
			}
		case err := <-done:
			t.Fatalf("the listen ended: %v", err)
		case <-time.After(30 * time.Second): // a hang, not a measure
			t.Fatalf("heard nothing; want revision %d", rev)
		}
	}
	want(0)
	if _, err := st.UpsertSpec(ctx, offer(t, "r1", "a", "p")); err != nil {
		t.Fatal(err)
	}
	commit(t, st)
	want(1)
	for _, name := range []string{"b", "c"} {
		if _, err := st.UpsertSpec(ctx, offer(t, "r1", name, "p")); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, st)
	want(3)
	if reads := ops.Snapshot().Reads; reads != 3 {
		t.Fatalf("three snapshots cost %d reads, want 3", reads)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchRevision after its context ended: %v, want context.Canceled", err)
	}
	select {
	case rev := <-heard:
		t.Fatalf("heard revision %d more than the commits made", rev)
	default:
	}
}

// A listen Firestore refuses ends WatchRevision with the error, wrapped
// with what it was doing and its gRPC code kept, having heard nothing
// and read nothing.
func TestWatchRevisionRefused(t *testing.T) {
	t.Parallel()
	refuse := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if strings.HasSuffix(method, "/Listen") {
			return nil, status.Error(codes.PermissionDenied, "listen refused by the test")
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	pass := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	client := emulatortest.FirestoreVia(t, emulatortest.ProjectID(t), "", pass, grpc.WithStreamInterceptor(refuse))
	ops := &store.Ops{}
	err := store.New(client).WithOps(ops).WatchRevision(context.Background(), func(rev int64) {
		t.Errorf("heard revision %d through a refused listen", rev)
	})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("refused listen: %v, want PermissionDenied", err)
	}
	if !strings.Contains(err.Error(), "listen to the catalog revision") {
		t.Fatalf("refused listen: %v, want it to say what it was doing", err)
	}
	if reads := ops.Snapshot().Reads; reads != 0 {
		t.Fatalf("a refused listen cost %d reads", reads)
	}
}

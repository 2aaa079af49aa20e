package emulatortest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The watch counts exactly the transactions that read or write the
// document, their retries after the emulator aborted one of two that
// contend, and plain writes; other transactions it leaves out.
func TestTxWatch(t *testing.T) {
	ctx := context.Background()
	_, project := FirestoreProject(t)
	w := NewTxWatch("meta/catalog")
	c := FirestoreVia(t, project, "", w.Unary, grpc.WithStreamInterceptor(w.Stream))
	meta := c.Doc("meta/catalog")
	if _, err := meta.Set(ctx, map[string]any{"revision": 0}); err != nil {
		t.Fatal(err)
	}
	if err := c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if _, err := tx.Get(c.Doc("meta/other")); err != nil && status.Code(err) != codes.NotFound {
			return err
		}
		return tx.Set(c.Doc("meta/other"), map[string]any{"x": 1})
	}); err != nil {
		t.Fatal(err)
	}
	if got := w.Counts(); got != (TxCounts{PlainWrites: 1}) {
		t.Fatalf("after a plain write and an unrelated transaction: %+v", got)
	}
	// Two transactions that read and write meta/catalog at once: the
	// emulator aborts one, the client retries it.
	var wg sync.WaitGroup
	var read atomic.Int32 // reads answered, not only sent
	gate := make(chan struct{})
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			errs[i] = c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
				snap, err := tx.Get(meta)
				if err != nil {
					return err
				}
				read.Add(1)
				<-gate // both have read before either writes
				rev, _ := snap.DataAt("revision")
				return tx.Set(meta, map[string]any{"revision": rev.(int64) + 1})
			})
		})
	}
	// Let both reads be answered (or, should the emulator make the
	// second wait for the first, give up waiting), then let them write.
	// The watch counts a read when it is sent: waiting for that alone let
	// the first commit reach the emulator before the second read did, and
	// nothing contended.
	for deadline := time.Now().Add(5 * time.Second); read.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(gate)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := w.Counts()
	if got.Retried < 1 || got.Transactions != 2+got.Retried || got.Commits != 2 || got.PlainWrites != 1 {
		t.Fatalf("two contending transactions: %+v; want at least one retry, each attempt counted, two commits", got)
	}
	t.Logf("two contending transactions: %+v", got)
}

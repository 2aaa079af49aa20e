package worker_test

import (
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/bootstrap"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/store"
)

// checkedProject is a client on a Firestore project no other test uses,
// and its end check: every test built on it ends with the invariant
// checker, settled (its bootstraps reported, their commits handled). A
// test that ends otherwise on purpose says so through the end check.
func checkedProject(t *testing.T) (*firestore.Client, string, *invariant.AtEnd) {
	t.Helper()
	client, project := emulatortest.FirestoreProject(t)
	return client, project, invariant.CheckAtEnd(t, client, invariant.Options{Settled: true})
}

// checked is checkedProject for a test that needs the client only.
func checked(t *testing.T) *firestore.Client {
	t.Helper()
	client, _, _ := checkedProject(t)
	return client
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newOps is the operations of a project of their own, on a settable
// clock, and the project's end check.
func newOps(t *testing.T) (*bootstrap.Operations, *clock, *invariant.AtEnd) {
	c := &clock{t: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	client, _, end := checkedProject(t)
	ops := bootstrap.NewOperations(store.New(client), 10*time.Minute, time.Hour)
	ops.Now = c.now
	return ops, c, end
}

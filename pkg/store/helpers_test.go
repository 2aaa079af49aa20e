package store_test

import (
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/invariant"
)

// checkedProject is a client on a Firestore project no other test uses,
// and its end check: the test ends with the invariant checker. A store
// test calls single operations, not the runs and the commit after them
// that settle a project, so the check keeps to the rules of every
// instant unless the test says it ends settled (end.Settled = true).
// (The store's own internal tests, package store, cannot import the
// checker, which imports the store: they write manifests only.)
func checkedProject(t *testing.T) (*firestore.Client, string, *invariant.AtEnd) {
	t.Helper()
	client, project := emulatortest.FirestoreProject(t)
	return client, project, invariant.CheckAtEnd(t, client, invariant.Options{})
}

// checked is checkedProject for a test that needs the client only.
func checked(t *testing.T) *firestore.Client {
	t.Helper()
	client, _, _ := checkedProject(t)
	return client
}

package bootstrap_test

import (
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/invariant"
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

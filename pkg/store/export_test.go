package store

import "cloud.google.com/go/firestore"

// Client exposes the underlying client to this package's tests, which
// seed documents the store itself never writes. No package above the
// store reaches Firestore but through it.
func (s *Store) Client() *firestore.Client { return s.client }

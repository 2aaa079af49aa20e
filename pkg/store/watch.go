package store

import (
	"context"
	"errors"

	"google.golang.org/api/iterator"

	"github.com/specsync/specsync/pkg/failure"
)

// WatchRevision listens to meta/catalog (a Firestore snapshot listener)
// and calls heard with the catalog revision: once with the revision as
// the listen starts (0 before the first change), then each time the
// document is written, until ctx ends or the listen fails. Every snapshot
// costs one read, whoever heard it: a commit batch moves meta/catalog
// once, and so does the committer's published mark, which heard gets
// with the revision unchanged. heard runs on the caller's goroutine, one
// call at a time; it must not block for long, since Firestore holds
// later snapshots until it returns.
//
// It returns ctx's error once ctx ends, and otherwise the classified
// error the listen ended with: the client library reopens a stream
// broken by a retryable error (unavailable, an internal error, an
// expired token) by itself, silently, so an error here is one it gave up
// on (permission denied, a refused open, the client closed). Such a
// listener is done: a caller that still wants the revision calls
// WatchRevision again.
func (s *Store) WatchRevision(ctx context.Context, heard func(revision int64)) error {
	it := s.catalogMeta().Snapshots(ctx)
	defer it.Stop()
	for {
		snap, err := it.Next()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, iterator.Done) {
			// What Next says when the stream ends without an error, which
			// the library documents as rare and network-made.
			return failure.New(failure.Unavailable, "listen to the catalog revision: the listen stream ended")
		}
		if err != nil {
			return classify(err, "listen to the catalog revision")
		}
		s.ops.read(1)
		if !snap.Exists() {
			heard(0)
			continue
		}
		var m struct {
			Revision int64 `firestore:"revision"`
		}
		if err := snap.DataTo(&m); err != nil {
			return classify(err, "decode catalog revision")
		}
		heard(m.Revision)
	}
}

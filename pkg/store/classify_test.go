package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/store"
)

// What the store answers for a name no document may have: never a
// retryable failure (a client's mistake is not the store being down),
// and never Firestore's own text for a client (failure.Describe): its
// status text names the project, database and document path.
func TestStoreErrorsOfBadNames(t *testing.T) {
	ctx := context.Background()
	st := store.New(checked(t))
	for _, id := range []string{"\xff", "\xed\xb0\x80", ".", "..", "__x__"} {
		for name, call := range map[string]func() error{
			"GetInstance": func() error { _, err := st.GetInstance(ctx, id); return err },
			"GetBinding":  func() error { _, err := st.GetBinding(ctx, "i", id); return err },
			"GetSpec":     func() error { _, err := st.GetSpec(ctx, id); return err },
			"Deprovision": func() error { _, err := st.DeleteInstance(ctx, id); return err },
		} {
			err := call()
			if err == nil {
				t.Errorf("%s(%q): no error", name, id)
				continue
			}
			if failure.Retryable(err) {
				t.Errorf("%s(%q): %v is retryable (kind %s)", name, id, err, failure.KindOf(err))
			}
			desc := failure.Describe(err)
			for _, s := range []string{"projects/", "documents/", "rpc error", "firestore"} {
				if strings.Contains(desc, s) {
					t.Errorf("%s(%q): a client would be told %q", name, id, desc)
				}
			}
		}
	}
}

package stack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/emulator"
)

// The local registry serves the spec files as they are at each sync: a
// new or edited file is pushed (an unchanged one is not), a removed one's
// repository tag is deleted, and none of it notifies the webhook (the
// bootstrap after it finds the changes itself).
func TestSpecFilesSyncPushesWhatChanged(t *testing.T) {
	ctx := context.Background()
	reg, err := emulator.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	var events atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { events.Add(1) }))
	defer hook.Close()

	dir := t.TempDir()
	write := func(file, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "name: a\n")
	write("b.yaml", "name: b\n")
	write("notes.txt", "not a spec\n")
	files, err := openSpecFiles(reg, dir)
	if err != nil {
		t.Fatal(err)
	}
	pushed, deleted, err := files.sync(ctx)
	if err != nil || !slices.Equal(pushed, []string{"specs/a", "specs/b"}) || len(deleted) != 0 {
		t.Fatalf("first sync: pushed %v deleted %v: %v", pushed, deleted, err)
	}
	reg.Notify(hook.URL, nil, nil)

	digest := func(repo string) string {
		t.Helper()
		ref, _ := name.NewTag(reg.Host()+"/"+repo+":latest", name.Insecure)
		d, err := remote.Head(ref, remote.WithContext(ctx))
		if err != nil {
			return ""
		}
		return d.Digest.String()
	}
	a1 := digest("specs/a")
	if pushed, deleted, err = files.syncQuietly(ctx); err != nil || len(pushed)+len(deleted) != 0 {
		t.Fatalf("sync with nothing edited: pushed %v deleted %v: %v", pushed, deleted, err)
	}
	write("a.yaml", "name: a\ndescription: edited\n")
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	write("c.yaml", "name: c\n")
	pushed, deleted, err = files.syncQuietly(ctx)
	if err != nil || !slices.Equal(pushed, []string{"specs/a", "specs/c"}) || !slices.Equal(deleted, []string{"specs/b"}) {
		t.Fatalf("sync after edits: pushed %v deleted %v: %v", pushed, deleted, err)
	}
	if a2 := digest("specs/a"); a2 == "" || a2 == a1 {
		t.Errorf("edited a: digest %q, was %q", a2, a1)
	}
	if digest("specs/b") != "" || digest("specs/c") == "" {
		t.Errorf("b still served or c not: %q %q", digest("specs/b"), digest("specs/c"))
	}
	time.Sleep(500 * time.Millisecond) // the notifier sends from a goroutine of its own
	if n := events.Load(); n != 0 {
		t.Errorf("the quiet syncs notified the webhook %d times", n)
	}
	// A push of anyone else's, after, notifies as before.
	if _, err := emulator.PushSpecFile(ctx, reg.Host(), "specs/d", []byte("name: d\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for events.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if events.Load() == 0 {
		t.Error("a push after the syncs notified nothing")
	}
}

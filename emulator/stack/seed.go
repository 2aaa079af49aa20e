package stack

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/examples"
)

// DefaultSpecsDir is where `make run` reads the example specs from: the
// files themselves, so that an edit shows up on the next bootstrap.
const DefaultSpecsDir = "examples/registry"

// specFiles are the spec files the local OCI registry serves, and what it
// pushed of each, so that a bootstrap re-seeds only what changed. An edit
// of a file is then exactly that change on the next bootstrap: the file's
// image is pushed again (images are deterministic, so an unchanged file
// keeps its digest and is not even pushed), a removed file's tag deleted.
type specFiles struct {
	host string
	reg  *emulator.Registry
	fsys fs.FS
	dir  string // in fsys
	// from says where the files are, for logs and the banner.
	from string

	mu     sync.Mutex
	pushed map[string][32]byte // repository -> sha256 of the file pushed
}

// openSpecFiles picks the files: dir on disk ("" is DefaultSpecsDir if it
// exists in the working directory, else the copies built into the
// binary).
func openSpecFiles(reg *emulator.Registry, dir string) (*specFiles, error) {
	s := &specFiles{host: reg.Host(), reg: reg, pushed: map[string][32]byte{}}
	if dir == "" {
		if info, err := os.Stat(DefaultSpecsDir); err == nil && info.IsDir() {
			dir = DefaultSpecsDir
		}
	}
	if dir == "" {
		s.fsys, s.dir, s.from = examples.Registry, examples.RegistryDir, "the example specs built into the binary"
		return s, nil
	}
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() {
		return nil, fmt.Errorf("spec files %s: not a readable directory", dir)
	}
	s.fsys, s.dir, s.from = os.DirFS(dir), ".", dir
	return s, nil
}

// sync makes the registry serve the files as they are now: it pushes the
// files that are new or changed since the last sync and deletes the
// repositories of files that are gone. It returns what it did.
func (s *specFiles) sync(ctx context.Context) (pushed, deleted []string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	files, err := emulator.ReadSpecFiles(s.fsys, s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("spec files %s: %w", s.from, err)
	}
	now := make(map[string][]byte, len(files))
	for _, f := range files {
		now[f.Repo] = f.Content
	}
	for _, repo := range slices.Sorted(maps.Keys(now)) {
		sum := sha256.Sum256(now[repo])
		if prev, ok := s.pushed[repo]; ok && prev == sum {
			continue
		}
		if _, err := emulator.PushSpecFile(ctx, s.host, repo, now[repo]); err != nil {
			return pushed, deleted, fmt.Errorf("push %s: %w", repo, err)
		}
		s.pushed[repo] = sum
		pushed = append(pushed, repo)
	}
	for _, repo := range slices.Sorted(maps.Keys(s.pushed)) {
		if _, ok := now[repo]; ok {
			continue
		}
		ref, err := name.NewTag(s.host+"/"+repo+":latest", name.Insecure)
		if err != nil {
			return pushed, deleted, err
		}
		if err := remote.Delete(ref, remote.WithContext(ctx)); err != nil {
			return pushed, deleted, fmt.Errorf("delete %s: %w", repo, err)
		}
		delete(s.pushed, repo)
		deleted = append(deleted, repo)
	}
	return pushed, deleted, nil
}

// syncQuietly is sync with the registry's notifications off: the
// bootstrap that follows finds the changes itself, rather than a webhook
// run racing it for them.
func (s *specFiles) syncQuietly(ctx context.Context) (pushed, deleted []string, err error) {
	err = s.reg.Quietly(func() error {
		var err error
		pushed, deleted, err = s.sync(ctx)
		return err
	})
	return pushed, deleted, err
}

// beforeBootstrap re-seeds the registry from the files before a bootstrap
// (POST /bootstrap, a dry run too) reaches the bootstrap function. A
// failure is logged, and the bootstrap goes on with what the registry
// holds. It runs before the function checks the admin token: a refused
// request has synced files that are the operator's own, on a loopback
// stack, which costs a directory read when nothing changed.
func (s *specFiles) beforeBootstrap(next http.HandlerFunc, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/bootstrap" {
			pushed, deleted, err := s.syncQuietly(r.Context())
			switch {
			case err != nil:
				log.Warn("re-seeding the local registry from the spec files failed; bootstrapping what it holds", "from", s.from, "error", err)
			case len(pushed)+len(deleted) > 0:
				log.Info("local registry re-seeded from the spec files", "from", s.from, "pushed", pushed, "deleted", deleted)
			}
		}
		next(w, r)
	}
}

package emulator

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/specsync/specsync/pkg/spec"
)

// Registry is an in-process OCI registry (go-containerregistry's
// pkg/registry) served over real HTTP, so clients exercise the same
// transport as against a remote registry. It does not paginate _catalog
// (it cuts the list at n, without a Link header, so its callers either use
// a page size above the repository count or name the repositories; the
// OCI source detects the cut and fails rather than take it for the end)
// and has no authentication.
type Registry struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	// notify sends notifications of accepted manifest pushes and deletes
	// once Notify has named an endpoint.
	notify *notifier

	mu       sync.Mutex
	requests []Request
}

// Request is a request the registry served: what benchmarks count (the
// upstream cost of a run).
type Request struct {
	Method, Path, UserAgent string
}

// Requests returns the requests served since the last ResetRequests that
// match (nil matches all).
func (r *Registry) Requests(match func(Request) bool) []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Request
	for _, q := range r.requests {
		if match == nil || match(q) {
			out = append(out, q)
		}
	}
	return out
}

// ResetRequests forgets the requests served so far.
func (r *Registry) ResetRequests() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = nil
}

func (r *Registry) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, Request{Method: req.Method, Path: req.URL.Path, UserAgent: req.UserAgent()})
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	})
}

// StartRegistry serves a fresh, empty registry on addr; "127.0.0.1:0"
// picks a free port.
func StartRegistry(addr string) (*Registry, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("registry: listen %s: %w", addr, err)
	}
	r := &Registry{ln: ln, done: make(chan struct{}), notify: newNotifier(ln.Addr().String())}
	r.srv = &http.Server{
		// pkg/registry logs every request to stderr by default, which
		// drowns test output.
		Handler:           r.record(r.notify.wrap(registry.New(registry.Logger(log.New(io.Discard, "", 0))))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln)
	}()
	return r, nil
}

// Host is the registry's "127.0.0.1:PORT", the registry part of an image
// reference.
func (r *Registry) Host() string { return r.ln.Addr().String() }

// Close stops the server at once and drops its contents. It does not wait
// for idle keep-alive connections: Shutdown would, for up to 5 s each, for
// connections a client's transport dialled but never used.
func (r *Registry) Close() error {
	err := r.srv.Close()
	<-r.done
	r.notify.stop()
	return err
}

// DefaultPlatform is what an image pushed without platforms claims to be.
var DefaultPlatform = spec.Platform{OS: "linux", Architecture: "amd64"}

// PushSpecImage pushes host/repo:tag carrying label as the spec label
// (spec.LabelKey); label is passed through as is, usually base64 of YAML.
// With no or one platform it pushes a single image; with more, an image
// index with one image per platform. It returns the digest the tag points
// to. Images are deterministic: equal inputs give equal digests.
func PushSpecImage(ctx context.Context, host, repo, tag string, label string, platforms []spec.Platform) (string, error) {
	return pushImage(ctx, host, repo, tag, map[string]string{spec.LabelKey: label}, platforms)
}

// PushImageWithLabels pushes a single linux/amd64 image with exactly the
// given labels (none, a broken spec label, ...) and returns its digest.
func PushImageWithLabels(ctx context.Context, host, repo, tag string, labels map[string]string) (string, error) {
	return pushImage(ctx, host, repo, tag, labels, nil)
}

func pushImage(ctx context.Context, host, repo, tag string, labels map[string]string, platforms []spec.Platform) (string, error) {
	ref, err := name.NewTag(host + "/" + repo + ":" + tag)
	if err != nil {
		return "", fmt.Errorf("push %s/%s:%s: %w", host, repo, tag, err)
	}
	opts := []remote.Option{remote.WithContext(ctx)}
	if len(platforms) <= 1 {
		p := DefaultPlatform
		if len(platforms) == 1 {
			p = platforms[0]
		}
		img, err := labelledImage(labels, p)
		if err != nil {
			return "", fmt.Errorf("push %s: %w", ref, err)
		}
		if err := remote.Write(ref, img, opts...); err != nil {
			return "", fmt.Errorf("push %s: %w", ref, err)
		}
		d, err := img.Digest()
		if err != nil {
			return "", err
		}
		return d.String(), nil
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := labelledImage(labels, p)
		if err != nil {
			return "", fmt.Errorf("push %s: %w", ref, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{
				OS:           p.OS,
				Architecture: p.Architecture,
				Variant:      p.Variant,
			}},
		})
	}
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// emptyTar is the one layer every image gets: some registries (and some
// clients) reject or mishandle images without layers.
var emptyTar = func() []byte {
	var b bytes.Buffer
	if err := tar.NewWriter(&b).Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

func labelledImage(labels map[string]string, p spec.Platform) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, static.NewLayer(emptyTar, types.OCIUncompressedLayer))
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = p.OS
	cf.Architecture = p.Architecture
	cf.Variant = p.Variant
	if len(labels) > 0 {
		cf.Config.Labels = make(map[string]string, len(labels))
		for k, v := range labels {
			cf.Config.Labels[k] = v
		}
	}
	return mutate.ConfigFile(img, cf)
}

// SeedPlatforms are the platforms SeedRegistry pushes every spec for.
var SeedPlatforms = []spec.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// SeedRepository is the repository a spec file is pushed to: specs/ and
// the file's base name without its extension.
func SeedRepository(file string) string {
	base := path.Base(file)
	return "specs/" + strings.TrimSuffix(base, path.Ext(base))
}

// PushSpecFile pushes a spec file's content to host/repo:latest as
// SeedRegistry does (base64 in the spec label, for SeedPlatforms) and
// returns the digest the tag points to. The content is not checked: a
// broken spec is a broken entry upstream, which is worth being able to
// push.
func PushSpecFile(ctx context.Context, host, repo string, content []byte) (string, error) {
	label := base64.StdEncoding.EncodeToString(content)
	return PushSpecImage(ctx, host, repo, "latest", label, SeedPlatforms)
}

// SpecFile is one spec file of a directory and the repository it seeds.
type SpecFile struct {
	Path    string // in the file system read
	Repo    string // SeedRepository's
	Content []byte
}

// ReadSpecFiles reads every *.yaml, *.yml and *.json file in dir of
// fsys, in file name order, each with its repository. Two files with one
// base name are an error: one would silently overwrite the other.
func ReadSpecFiles(fsys fs.FS, dir string) ([]SpecFile, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var files []SpecFile
	from := map[string]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		switch strings.ToLower(path.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		file := path.Join(dir, e.Name())
		repo := SeedRepository(e.Name())
		if prev, dup := from[repo]; dup {
			return nil, fmt.Errorf("%s and %s both map to repository %s", prev, file, repo)
		}
		from[repo] = file
		content, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, err
		}
		files = append(files, SpecFile{Path: file, Repo: repo, Content: content})
	}
	return files, nil
}

// SeedRegistry pushes every spec file in dir (ReadSpecFiles) as
// host/specs/<base name>:latest, the file's content base64-encoded in
// the spec label, for SeedPlatforms. It returns the repositories pushed, in
// file name order.
func SeedRegistry(ctx context.Context, host string, specs fs.FS, dir string) ([]string, error) {
	files, err := ReadSpecFiles(specs, dir)
	if err != nil {
		return nil, fmt.Errorf("seed registry: %w", err)
	}
	var repos []string
	for _, f := range files {
		if _, err := PushSpecFile(ctx, host, f.Repo, f.Content); err != nil {
			return repos, fmt.Errorf("seed registry from %s: %w", f.Path, err)
		}
		repos = append(repos, f.Repo)
	}
	return repos, nil
}

package registry_test

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
)

func newDir(t *testing.T, fsys fs.FS, filter *registry.Filter) *registry.Dir {
	t.Helper()
	src, err := registry.NewDir(registry.DirConfig{FS: fsys, Root: "test:specs", Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestDirEntries(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"alpha.yaml":     {Data: []byte(specYAML("alpha"))},
		"beta.yml":       {Data: []byte(label(specYAML("beta")))}, // the label form is accepted too
		"gamma.json":     {Data: []byte(`{"name":"gamma","description":"g","plans":[{"name":"p","description":"p"}]}`)},
		"broken.yaml":    {Data: []byte("name: broken\ndescription: no plans\n")},
		"garbage.json":   {Data: []byte("{not json")},
		"huge.yaml":      {Data: []byte(specYAML("huge") + "# " + strings.Repeat("x", spec.MaxSpecBytes) + "\n")},
		"dup.json":       {Data: []byte(`{"name":"dup","description":"d","plans":[{"name":"p","description":"p"}]}`)},
		"dup.yaml":       {Data: []byte(specYAML("dup"))},
		"README.md":      {Data: []byte("# not a spec")},
		"notes.txt":      {Data: []byte("name: no")},
		".hidden.yaml":   {Data: []byte(specYAML("hidden"))},
		"sub/deep.yaml":  {Data: []byte(specYAML("deep"))},
		"upper.YAML":     {Data: []byte(specYAML("upper"))},
		"dir.yaml/x.txt": {Data: []byte("a directory named like a spec")},
	}
	l := fetch(t, newDir(t, fsys, nil))
	want := []string{"alpha", "beta", "broken", "dup", "dup", "gamma", "garbage", "huge", "upper"}
	if got := names(l); !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	ok := map[string]bool{"alpha": true, "beta": true, "gamma": true, "upper": true}
	for i, e := range l.Entries {
		if ok[e.Name] {
			if e.Err != nil || e.Spec == nil || e.Spec.Name != e.Name {
				t.Errorf("%s: spec %v err %v", e.Name, e.Spec, e.Err)
			}
			continue
		}
		if e.Name == "dup" && i == 3 {
			if e.Err != nil || e.Ref != "test:specs/dup.json" {
				t.Errorf("first dup: ref %s err %v", e.Ref, e.Err)
			}
			continue
		}
		if e.Err == nil || e.Spec != nil {
			t.Errorf("%s (%s): want an entry error, got spec %v", e.Name, e.Ref, e.Spec)
		} else if !strings.Contains(e.Err.Error(), strings.TrimPrefix(e.Ref, "test:specs/")) {
			t.Errorf("%s: error %q does not name the file", e.Name, e.Err)
		}
	}
	if e := byName(l)["alpha"]; e.Ref != "test:specs/alpha.yaml" {
		t.Errorf("alpha ref %s", e.Ref)
	}
}

// failingFS breaks on chosen names. It implements Open only, so that
// fs.ReadDir and every read go through it.
type failingFS struct {
	fsys fstest.MapFS
	fail map[string]bool
}

func (f failingFS) Open(name string) (fs.File, error) {
	if f.fail[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("permission denied")}
	}
	return f.fsys.Open(name)
}

func TestDirUnreadable(t *testing.T) {
	t.Parallel()
	base := fstest.MapFS{"a.yaml": {Data: []byte(specYAML("a"))}, "b.yaml": {Data: []byte(specYAML("b"))}}
	fetchFails(t, newDir(t, failingFS{base, map[string]bool{".": true}}, nil), "test:specs", "permission denied")

	l := fetch(t, newDir(t, failingFS{base, map[string]bool{"b.yaml": true}}, nil))
	e := byName(l)
	if e["a"].Err != nil || e["b"].Err == nil || !strings.Contains(e["b"].Err.Error(), "permission denied") {
		t.Errorf("a: %v, b: %v", e["a"].Err, e["b"].Err)
	}
}

func TestDirFilterAndDigest(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"a.yaml":        {Data: []byte(specYAML("a"))},
		"b.yaml":        {Data: []byte(specYAML("b"))},
		"secret-x.yaml": {Data: []byte(specYAML("secret-x"))},
	}
	opened := failingFS{fsys, map[string]bool{"secret-x.yaml": true}}
	l := fetch(t, newDir(t, opened, mustFilter(t, nil, []string{"secret-.*"})))
	if got := names(l); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("entries %v: a denied file was read or listed", got)
	}

	d1 := fetch(t, newDir(t, fsys, nil)).Digest
	d2 := fetch(t, newDir(t, fsys, nil)).Digest
	if d1 != d2 {
		t.Errorf("equal listings, digests %s and %s", d1, d2)
	}
	fsys["b.yaml"] = &fstest.MapFile{Data: []byte(specYAML("b", "default", "more"))}
	if d3 := fetch(t, newDir(t, fsys, nil)).Digest; d3 == d1 {
		t.Error("a changed spec left the digest unchanged")
	}
	// The same specs in a different file layout are the same listing only
	// if names and refs match too.
	fsys["b.yaml"] = &fstest.MapFile{Data: []byte(specYAML("b"))}
	if d4 := fetch(t, newDir(t, fsys, nil)).Digest; d4 != d1 {
		t.Error("reverting the change did not restore the digest")
	}
}

func TestNewDirValidates(t *testing.T) {
	t.Parallel()
	if _, err := registry.NewDir(registry.DirConfig{}); err == nil {
		t.Error("NewDir without a file system succeeded")
	}
}

package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/specsync/specsync/examples"
	"github.com/specsync/specsync/pkg/spec"
)

// DirConfig configures a directory of spec files.
type DirConfig struct {
	// FS is the directory, e.g. os.DirFS(path) or an embed.FS sub-tree.
	FS fs.FS
	// Root names the directory in refs ("/srv/specs", "embedded:examples").
	Root   string
	Filter *Filter
}

// Dir lists the spec files at the top level of a directory: every *.yaml,
// *.yml and *.json file is one entry named after the file.
type Dir struct {
	cfg DirConfig
}

// NewDir checks cfg.
func NewDir(cfg DirConfig) (*Dir, error) {
	if cfg.FS == nil {
		return nil, errors.New("dir: no file system")
	}
	if cfg.Root == "" {
		cfg.Root = "."
	}
	return &Dir{cfg: cfg}, nil
}

// String names the source for logs.
func (d *Dir) String() string { return "dir " + d.cfg.Root }

var specExtensions = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// Fetch reads the directory. Only a directory that cannot be listed fails
// the fetch; a file that cannot be read or parsed is its entry's error.
func (d *Dir) Fetch(ctx context.Context, _ FetchOptions) (*Listing, error) {
	files, err := fs.ReadDir(d.cfg.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("dir %s: %w", d.cfg.Root, err)
	}
	entries := []Entry{}
	first := map[string]string{}
	for _, f := range files { // ReadDir sorts by file name
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("dir %s: %w", d.cfg.Root, err)
		}
		fileName := f.Name()
		ext := path.Ext(fileName)
		// Hidden files are editor backups and the "..data" links of a
		// Kubernetes volume mount, never specs.
		if f.IsDir() || strings.HasPrefix(fileName, ".") || !specExtensions[strings.ToLower(ext)] {
			continue
		}
		e := Entry{Name: strings.TrimSuffix(fileName, ext), Ref: d.cfg.Root + "/" + fileName}
		if !d.cfg.Filter.Allows(e.Name) {
			continue
		}
		if prev, dup := first[e.Name]; dup {
			e.Err = fmt.Errorf("file %s: entry name %q is already used by file %s", fileName, e.Name, prev)
			entries = append(entries, e)
			continue
		}
		first[e.Name] = fileName
		data, err := readLimited(d.cfg.FS, fileName, spec.MaxSpecBytes)
		if err == nil {
			e.Spec, err = spec.Parse(data)
		}
		if err != nil {
			e.Spec, e.Err = nil, fmt.Errorf("file %s: %w", fileName, err)
		}
		entries = append(entries, e)
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return &Listing{Entries: entries, Digest: ListingDigest(entries)}, nil
}

// readLimited reads at most limit+1 bytes, enough for spec.Parse to say
// the file is too big without holding all of it.
func readLimited(fsys fs.FS, name string, limit int) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(limit)+1))
}

func init() {
	Register(Kind{Type: "dir", New: func() Block { return new(DirBlock) }, Order: 30})
}

// DirBlock is the registries file's dir block: a directory of spec files.
type DirBlock struct {
	// Path is relative to the registries file's directory.
	Path string `json:"path,omitempty"`
	// Embedded serves the example registry compiled into the binary.
	Embedded bool `json:"embedded,omitempty"`
}

// Build checks the block and builds its source; a path is opened with
// bc.OpenDir.
func (b *DirBlock) Build(bc BuildContext) (Source, error) {
	var fsys fs.FS
	var root string
	switch {
	case b.Embedded && b.Path != "":
		return nil, errors.New("dir.embedded: set either path or embedded, not both")
	case b.Embedded:
		sub, err := fs.Sub(examples.Registry, examples.RegistryDir)
		if err != nil {
			return nil, err
		}
		fsys, root = sub, "embedded:examples"
	case b.Path != "":
		if bc.OpenDir == nil {
			return nil, errors.New("dir.path: no directory to read it from")
		}
		var err error
		if fsys, root, err = bc.OpenDir(b.Path); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("dir: set path or embedded")
	}
	return NewDir(DirConfig{FS: fsys, Root: root, Filter: bc.Filter})
}

// Describe is the path, or the embedded examples.
func (b *DirBlock) Describe() Description {
	if b.Embedded {
		return Description{Location: "the examples compiled into the binary"}
	}
	return Description{Location: b.Path}
}

package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"time"
)

// filesFS is a read-only file system held in memory: a config bundle's
// files, by slash-separated path. Directories are implied by the paths
// of the files under them, so there is no empty directory.
//
// It is here rather than testing/fstest's MapFS, which is for tests (and
// would link package testing into the functions), or archive/zip's
// reader, which would have the bundle's files zipped again only to be
// read back.
type filesFS map[string]string

// newFilesFS checks a bundle's paths: each a valid fs path (relative,
// slash-separated, no "." or ".." element, no empty one), and none a
// file where another one's path needs a directory.
func newFilesFS(files map[string]string) (filesFS, error) {
	out := make(filesFS, len(files))
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !fs.ValidPath(name) || name == "." {
			return nil, fmt.Errorf("files: %q is not a relative, slash-separated path without . or .. elements", name)
		}
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if _, isFile := files[dir]; isFile {
				return nil, fmt.Errorf("files: %q is a file and the directory of %q", dir, name)
			}
		}
		out[name] = files[name]
	}
	return out, nil
}

// isDir reports whether name is a directory: the root, or the directory
// of a file.
func (f filesFS) isDir(name string) bool {
	if name == "." {
		return true
	}
	for p := range f {
		if strings.HasPrefix(p, name+"/") {
			return true
		}
	}
	return false
}

// Open opens a file or a directory.
func (f filesFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := f[name]; ok {
		return &memFile{info: fileInfo{name: path.Base(name), size: int64(len(data))}, Reader: strings.NewReader(data)}, nil
	}
	entries, err := f.ReadDir(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memDir{info: fileInfo{name: path.Base(name), dir: true}, entries: entries}, nil
}

// ReadFile returns a file's content.
func (f filesFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrInvalid}
	}
	data, ok := f[name]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return []byte(data), nil
}

// ReadDir lists a directory, sorted by name.
func (f filesFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	if !f.isDir(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	prefix := name + "/"
	if name == "." {
		prefix = ""
	}
	seen := map[string]bool{}
	var out []fs.DirEntry
	for _, p := range slices.Sorted(maps.Keys(f)) {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		child, _, below := strings.Cut(rest, "/")
		if seen[child] {
			continue
		}
		seen[child] = true
		info := fileInfo{name: child, dir: below}
		if !below {
			info.size = int64(len(f[p]))
		}
		out = append(out, fs.FileInfoToDirEntry(info))
	}
	return out, nil
}

// fileInfo describes a file or a directory of a filesFS.
type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64  { return i.size }
func (i fileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.dir }
func (i fileInfo) Sys() any           { return nil }

// memFile is an open file: its content's reader (Read, Seek, ReadAt).
type memFile struct {
	info fileInfo
	*strings.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

// memDir is an open directory: its entries, listed once.
type memDir struct {
	info    fileInfo
	entries []fs.DirEntry
	read    int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *memDir) Close() error               { return nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: errors.New("is a directory")}
}

// ReadDir returns the next n entries (n <= 0: all that are left), as
// fs.ReadDirFile says.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	left := d.entries[d.read:]
	if n <= 0 {
		d.read = len(d.entries)
		return slices.Clone(left), nil
	}
	if len(left) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(left))
	d.read += n
	return slices.Clone(left[:n]), nil
}

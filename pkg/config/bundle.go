package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
)

// BundleVersion is the version of the config bundle this code reads.
const BundleVersion = 1

// MaxBundleBytes bounds a config bundle: the registries file and the
// spec files of its dir sources, as one JSON document.
const MaxBundleBytes = 16 << 20

// Bundle is a registries file and the spec files of its dir sources as
// one JSON document: what terraform writes to a Cloud Storage object, so
// that the deployed functions read the file from there rather than from
// their source, and an edit needs no redeploy (Source).
type Bundle struct {
	// Version is BundleVersion; any other is refused, so a bundle written
	// by a newer terraform module is never half understood.
	Version int `json:"version"`
	// Registries is the registries file's text as written, ${VAR}
	// references unexpanded: they are expanded from the function's
	// environment as a file's are (Parse).
	Registries string `json:"registries"`
	// Files are the spec files of the dir sources, by path relative to
	// the registries file's directory ("specs/redis.yaml"): a dir source
	// with path specs reads the files under specs/. It may be empty.
	Files map[string]string `json:"files,omitempty"`
}

// ParseBundle checks a config bundle's content; source names it in errors
// (gs://BUCKET/OBJECT). Unknown fields are errors: a field this version
// does not know is one of a version it does not read.
func ParseBundle(data []byte, source string) (*Config, error) {
	fail := func(err error) (*Config, error) {
		return nil, fmt.Errorf("config bundle %s: %w", source, err)
	}
	var b Bundle
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return fail(fmt.Errorf("not a config bundle (JSON with version, registries and files): %w", err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail(errors.New("not a config bundle: more after its JSON object"))
	}
	if b.Version != BundleVersion {
		return fail(fmt.Errorf("version %d is not one this specsync reads (%d): deploy the module and the functions of one release", b.Version, BundleVersion))
	}
	files, err := newFilesFS(b.Files)
	if err != nil {
		return fail(err)
	}
	return parse([]byte(b.Registries), source, files.dirs)
}

// dirs opens a dir source's path in the bundle: the files under it, named
// "bundle:PATH" in refs. An absolute path, or one that leaves the
// registries file's directory, names nothing a bundle holds; nor does a
// directory without files (there are no empty ones in a bundle).
func (f filesFS) dirs(p string) (fs.FS, string, error) {
	clean := path.Clean(p)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, "", fmt.Errorf("dir.path %q: in a config bundle, a dir source reads the bundle's files, by a path relative to the registries file", p)
	}
	if !f.isDir(clean) {
		return nil, "", fmt.Errorf("dir.path %q: the config bundle holds no files under %s/", p, clean)
	}
	sub, err := fs.Sub(f, clean)
	if err != nil {
		return nil, "", fmt.Errorf("dir.path %q: %w", p, err)
	}
	return sub, "bundle:" + clean, nil
}

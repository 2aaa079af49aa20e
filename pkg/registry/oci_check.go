package registry

// The configuration checks the sources built on the OCI path share (oci,
// helm charts in an OCI registry, dockerhub, ghcr, google): errors that
// name a block's field, the host, the prefix, the repositories.

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// fieldError is a check's error about a field of a registries file's
// block: its text (err) starts with the field as the block writes it
// ("tag ...", "repositories[2] ...", "auth: ..."), and it reads
// "block.text", so that `config check` finds the field. Every error of NewOCI is one, so that the sources built
// on it (dockerhub, ghcr) can name the field as one of their own block
// (innerOCIError) without reading the message.
type fieldError struct {
	block string
	err   error
}

// fieldErrorf is a fieldError of block whose text is fmt.Errorf's.
func fieldErrorf(block, format string, args ...any) error {
	return &fieldError{block: block, err: fmt.Errorf(format, args...)}
}

func (e *fieldError) Error() string { return e.block + "." + e.err.Error() }

func (e *fieldError) Unwrap() error { return e.err }

// in is the error as one about a field of block, the block of a source
// built on this one's checks: "dockerhub.tag ...".
func (e *fieldError) in(block string) error { return errors.New(block + "." + e.err.Error()) }

// checkOCIHost checks a registry host (host[:port], without a scheme or a
// path) and returns the name options that reach it.
func checkOCIHost(block, host string, insecure bool) ([]name.Option, error) {
	switch {
	case strings.Contains(host, "://"):
		return nil, fieldErrorf(block, "host %q must be host[:port] without a scheme (use insecure for plain HTTP)", host)
	case strings.Contains(host, "/"):
		return nil, fieldErrorf(block, "host %q must be host[:port] without a path (put the path in prefix)", host)
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	if _, err := name.NewRegistry(host, opts...); err != nil {
		return nil, fieldErrorf(block, "host %q: %w", host, err)
	}
	return opts, nil
}

// repositoryPrefix trims a configured prefix of spaces and slashes, and
// says why it is not a repository path of host if it is not ("" is none).
func repositoryPrefix(host, prefix string, opts []name.Option) (string, error) {
	prefix = strings.Trim(strings.TrimSpace(prefix), "/")
	if prefix == "" {
		return "", nil
	}
	if _, err := name.NewRepository(host+"/"+prefix, opts...); err != nil {
		return prefix, err
	}
	if slices.Contains(strings.Split(prefix, "/"), "") {
		return prefix, errors.New("it has an empty component")
	}
	return prefix, nil
}

// checkRepositories checks a repository list: names relative to the
// prefix, each once.
func checkRepositories(block, host, prefix string, repos []string, opts []name.Option) error {
	var probs problems
	seen := map[string]bool{}
	for i, r := range repos {
		if _, err := name.NewRepository(host+"/"+join(prefix, r), opts...); err != nil || r == "" || strings.HasPrefix(r, "/") {
			probs.add(fieldErrorf(block, "repositories[%d] %q is not a repository name", i, r))
			continue
		}
		if seen[r] {
			probs.add(fieldErrorf(block, "repositories[%d] %q is listed twice", i, r))
		}
		seen[r] = true
	}
	return probs.err()
}

// join joins repository path parts, skipping empty ones.
func join(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "/")
}

// entryUnder is the entry a repository path on the host stands for, if it
// lies under prefix: the path relative to it, never "".
func entryUnder(prefix, path string) (string, bool) {
	if prefix == "" {
		return path, path != ""
	}
	rest, ok := strings.CutPrefix(path, prefix+"/")
	return rest, ok && rest != ""
}

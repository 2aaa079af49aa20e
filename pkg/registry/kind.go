package registry

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/specsync/specsync/pkg/verify/policy"
)

// A Kind is a type of source as the registries file names it: a registry
// entry's `type: X` and its `X:` block. Each source declares its kind once,
// in its own file, with Register (database/sql's habit): pkg/config loads
// any registered kind, `config describe` describes it and terraform derives
// its secrets from the naming convention its credential fields follow.
type Kind struct {
	// Type is the name of the type and of its block ("oci").
	Type string
	// New returns an empty block to decode the `X:` block into (a pointer
	// to a struct with JSON tags; decoding refuses unknown fields).
	New func() Block
	// Credentials names the block's fields that name a secret, as dotted
	// JSON paths ("auth.password_env"). Each is under the block's auth and
	// ends in _env (an environment variable of the reconcile function) or
	// _file (a file in it): the convention terraform derives the secrets
	// by (registries.tf), tested in kind_test.go.
	Credentials []string
	// Order places the type in lists of types (messages, descriptions):
	// the order the kinds were added, each new one after the last.
	Order int
}

// A Block is a decoded source block of the registries file.
type Block interface {
	// Build checks the block and builds its source. Its errors name the
	// block's fields ("oci.host", "helm.url"), so `config check` reports
	// them at their line.
	Build(BuildContext) (Source, error)
	// Describe says where the source is read from, for people. It holds
	// no secret.
	Describe() Description
}

// BuildContext is what a block's source is built with besides the block.
type BuildContext struct {
	// Filter is the registry's allow and deny.
	Filter *Filter
	// OpenDir opens a directory named in the block, relative to the
	// registries file (on disk, or in a config bundle): its files and the
	// name its refs start with. Its errors name the path.
	OpenDir func(path string) (fsys fs.FS, root string, err error)
	// Verify is the registry's verify block: when set, a source whose
	// entries are OCI manifests offers only those signed as it says.
	Verify *policy.Policy
}

// Description is where a source is read from: the host, URL, namespace
// or path, and the auth type. It holds no secret.
type Description struct {
	Location string
	Auth     string
}

var (
	kindsMu sync.RWMutex
	kinds   = map[string]Kind{}
)

// Register makes a kind of source known to the registries file. It panics
// when the kind is incomplete or its type is already registered.
func Register(k Kind) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if k.Type == "" || k.New == nil {
		panic("registry: Register needs a Type and New")
	}
	if _, dup := kinds[k.Type]; dup {
		panic("registry: Register called twice for type " + k.Type)
	}
	kinds[k.Type] = k
}

// LookupKind returns the registered kind of that type.
func LookupKind(typ string) (Kind, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	k, ok := kinds[typ]
	return k, ok
}

// Kinds returns the registered kinds by Order.
func Kinds() []Kind {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	out := make([]Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Kind) int { return cmp.Or(cmp.Compare(a.Order, b.Order), strings.Compare(a.Type, b.Type)) })
	return out
}

// Types returns the registered types by Order.
func Types() []string {
	var out []string
	for _, k := range Kinds() {
		out = append(out, k.Type)
	}
	return out
}

// CredentialRefs returns what a block's credential fields (its kind's
// Credentials) name: environment variables (fields ending in _env) and
// files (_file). Unset fields are left out.
func CredentialRefs(k Kind, b Block) (envs, files []string, err error) {
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, err
	}
	for _, p := range k.Credentials {
		var v any = doc
		for _, part := range strings.Split(p, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[part]
		}
		s, _ := v.(string)
		if s == "" {
			continue
		}
		switch {
		case strings.HasSuffix(p, "_env"):
			envs = append(envs, s)
		case strings.HasSuffix(p, "_file"):
			files = append(files, s)
		default:
			return nil, nil, fmt.Errorf("%s credential field %s ends in neither _env nor _file", k.Type, p)
		}
	}
	return envs, files, nil
}

// AuthCredentials are the credential fields of a block whose auth is an
// Auth.
var AuthCredentials = []string{"auth.username_env", "auth.password_env", "auth.token_env", "auth.password_file", "auth.token_file"}

// Duration is a time.Duration written as "30s", "2m".
type Duration time.Duration

// UnmarshalJSON accepts a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as \"30s\": %w", err)
	}
	if v < 0 {
		return fmt.Errorf("duration %q must not be negative", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// authType is the auth type a description shows.
func authType(a Auth) string {
	if a.Type == "" {
		return AuthAnonymous
	}
	return a.Type
}

// hostPath is host/prefix, or host without a prefix.
func hostPath(h, prefix string) string {
	if prefix == "" {
		return h
	}
	return path.Join(h, prefix)
}

// safeURL is u without what may carry a secret: user information, query
// and fragment. A URL that does not parse (a loaded file's always does)
// is not shown at all.
func safeURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return RedactURL(p)
}

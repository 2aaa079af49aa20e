package invariant

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/store"
)

func (c *checker) operations() {
	for _, id := range sortedKeys(c.s.Operations) {
		op := c.s.Operations[id]
		doc := store.OperationsCollection + "/" + id
		switch op.State {
		case api.InProgress, api.Failed:
		case api.Succeeded:
			for _, r := range op.Registries {
				res, ok := op.Results[r]
				if !ok {
					c.add("operation", doc, "succeeded without a result from registry %s", r)
				} else if res.State != api.Succeeded {
					c.add("operation", doc, "succeeded although registry %s %s", r, res.State)
				}
			}
		default:
			c.add("operation", doc, "state %q is not an OSB last_operation state", op.State)
		}
		switch {
		case op.DryRun && (op.Commit != nil || op.CatalogRevision != nil):
			c.add("operation", doc, "a dry run waited for a commit or names a catalog revision")
		case op.Commit != nil && len(op.Results) != len(op.Registries):
			c.add("operation", doc, "waits for its commit with %d of %d results", len(op.Results), len(op.Registries))
		case op.CatalogRevision != nil && (op.Commit == nil || op.Commit.CommittedAt.IsZero()):
			c.add("operation", doc, "names catalog revision %d without a finished commit", *op.CatalogRevision)
		case op.CatalogRevision != nil && *op.CatalogRevision > c.s.Catalog.Revision:
			c.add("operation", doc, "names catalog revision %d, beyond meta/catalog's %d", *op.CatalogRevision, c.s.Catalog.Revision)
		case op.State == api.Succeeded && !op.DryRun && op.CatalogRevision == nil:
			c.add("operation", doc, "succeeded without the catalog revision its changes reached")
		}
		regs := map[string]bool{}
		for _, r := range op.Registries {
			regs[r] = true
		}
		for _, r := range sortedKeys(op.Results) {
			if !regs[r] {
				c.add("operation", doc, "has a result from registry %s, which it does not include", r)
			}
		}
	}
	if id := c.s.CurrentOperation; id != "" {
		if _, ok := c.s.Operations[id]; !ok {
			c.add("operation", "meta/bootstrap", "names operation %s, which is not stored", id)
		}
	}
}

func (c *checker) secrets() {
	var canaries []string
	for _, k := range c.opts.Canaries {
		if k != "" {
			canaries = append(canaries, k)
		}
	}
	if len(canaries) == 0 {
		return
	}
	for _, path := range sortedKeys(c.s.Raw) {
		found := map[string]bool{}
		scan(path, canaries, found)
		scanValue(c.s.Raw[path], canaries, found)
		shown := path
		for _, k := range canaries {
			shown = strings.ReplaceAll(shown, k, mask(k))
		}
		for _, k := range canaries {
			if found[k] {
				c.add("secret", shown, "holds canary %s", mask(k))
			}
		}
	}
}

// scan looks for the canaries in s in every form a value takes on its
// way into a document: as it is, base64-encoded (a Basic credential, a
// []byte that went through JSON), and as the strings of a JSON text (a
// context kept as text, where a canary may be \u-escaped).
func scan(s string, canaries []string, found map[string]bool) {
	scanDepth(s, canaries, found, 0)
}

func scanDepth(s string, canaries []string, found map[string]bool, depth int) {
	for _, k := range canaries {
		if strings.Contains(s, k) {
			found[k] = true
		}
	}
	if depth > 2 || len(s) < 8 {
		return
	}
	t := strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(t); err == nil {
			scanDepth(string(b), canaries, found, depth+1)
			break
		}
	}
	if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") || strings.HasPrefix(t, `"`) {
		var v any
		if json.Unmarshal([]byte(t), &v) == nil {
			walkJSON(v, func(x string) { scanDepth(x, canaries, found, depth+1) })
		}
	}
}

// walkJSON calls f with every string (keys too) of a decoded JSON value.
func walkJSON(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for k, e := range x {
			f(k)
			walkJSON(e, f)
		}
	case []any:
		for _, e := range x {
			walkJSON(e, f)
		}
	}
}

func scanValue(v any, canaries []string, found map[string]bool) {
	switch x := v.(type) {
	case string:
		scan(x, canaries, found)
	case []byte:
		scan(string(x), canaries, found)
	case map[string]any:
		for k, e := range x {
			scan(k, canaries, found)
			scanValue(e, canaries, found)
		}
	case []any:
		// The Firestore client stores a named []byte (json.RawMessage)
		// as an array of integers: read one as the bytes it was.
		if b, ok := asBytes(x); ok {
			scan(string(b), canaries, found)
			return
		}
		for _, e := range x {
			scanValue(e, canaries, found)
		}
	case *firestore.DocumentRef:
		if x != nil {
			scan(x.Path, canaries, found)
		}
	}
}

// asBytes reads an array of integers from 0 to 255 as bytes.
func asBytes(xs []any) ([]byte, bool) {
	if len(xs) == 0 {
		return nil, false
	}
	b := make([]byte, len(xs))
	for i, e := range xs {
		n, ok := e.(int64)
		if !ok || n < 0 || n > 255 {
			return nil, false
		}
		b[i] = byte(n)
	}
	return b, true
}

// mask names a canary without repeating it whole in a test log.
func mask(k string) string {
	if len(k) <= 4 {
		return "****"
	}
	return k[:2] + strings.Repeat("*", len(k)-4) + k[len(k)-2:]
}

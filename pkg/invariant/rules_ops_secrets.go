package invariant

import (
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

func scan(s string, canaries []string, found map[string]bool) {
	for _, k := range canaries {
		if strings.Contains(s, k) {
			found[k] = true
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
		for _, e := range x {
			scanValue(e, canaries, found)
		}
	case *firestore.DocumentRef:
		if x != nil {
			scan(x.Path, canaries, found)
		}
	}
}

// mask names a canary without repeating it whole in a test log.
func mask(k string) string {
	if len(k) <= 4 {
		return "****"
	}
	return k[:2] + strings.Repeat("*", len(k)-4) + k[len(k)-2:]
}

package verify

import (
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/verify/policy"
)

// A binary that fetches imports this package, and so verifies: the
// registry fails the fetch of a verify block in a binary that does not
// (registry.RegisterVerifier).
func init() {
	registry.RegisterVerifier(func(p policy.Policy) (registry.Verifier, error) {
		v, err := Load(p)
		if err != nil {
			// Not a typed nil in the interface: the registry tests
			// the verifier against nil.
			return nil, err
		}
		return v, nil
	})
}

package reconcile

import (
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/failure"
)

// Registries are the registries of a registries file, in its order, as a
// Runner reconciles them.
type Registries []Registry

// LoadRegistries reads and checks a registries file (config.Load) and
// returns its registries. A file that does not load is failure.Invalid:
// retrying cannot fix it.
func LoadRegistries(path string) (Registries, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, failure.Wrap(failure.Invalid, err)
	}
	return FromConfig(cfg), nil
}

// FromConfig returns the registries of a loaded file, each with the
// deletion policy its entry sets (DefaultMaxMarkShare where it sets none).
func FromConfig(cfg *config.Config) Registries {
	out := make(Registries, len(cfg.Registries))
	for i, b := range cfg.Registries {
		p := Policy{MaxMarkShare: DefaultMaxMarkShare, AllowMassDeletion: b.AllowMassDeletion}
		if b.MaxMarkShare != nil {
			p.MaxMarkShare = *b.MaxMarkShare
		}
		out[i] = Registry{Name: b.Name, Source: b.Source, Policy: p, Describes: b.Describe()}
	}
	return out
}

// Lookup returns the registry with that name.
func (rs Registries) Lookup(name string) (Registry, bool) {
	for _, r := range rs {
		if r.Name == name {
			return r, true
		}
	}
	return Registry{}, false
}

// Names lists the registry names in file order.
func (rs Registries) Names() []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

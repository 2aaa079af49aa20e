package hooks

import (
	"time"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/registry"
)

// Registry is a configured registry as events see it.
type Registry struct {
	Name string
	// Source maps an event to the entry it concerns when it is a
	// registry.Selector; any other source (an index document, a
	// directory) takes an event as "reconcile the whole registry now".
	Source registry.Source
	// Hook authenticates the registry's webhook; nil: it has none.
	Hook *config.Hook
}

// FromConfig returns the registries of a loaded registries file, in its
// order.
func FromConfig(cfg *config.Config) []Registry {
	out := make([]Registry, len(cfg.Registries))
	for i, b := range cfg.Registries {
		out[i] = Registry{Name: b.Name, Source: b.Source, Hook: b.Hook}
	}
	return out
}

// Route returns the event messages an upstream change makes, received at
// at: one for every registry whose source is a Selector that selects it
// (its host, prefix, repository list, allow and deny, and tag decide),
// naming the entry. It is how an Artifact Registry notification, which
// comes from a project rather than from a registry of the file, finds
// the registries it concerns: a source that is not a Selector is never
// one of them (the event is about a repository of a registry host, which
// says nothing of an index document or a directory). A change no registry
// selects makes no message.
func Route(c registry.Change, regs []Registry, at time.Time) []queue.Message {
	var out []queue.Message
	for _, r := range regs {
		sel, ok := r.Source.(registry.Selector)
		if !ok {
			continue
		}
		if entry, ok := selectChange(sel, c); ok {
			out = append(out, queue.Message{Registry: r.Name, Entries: []string{entry}, EventAt: at})
		}
	}
	return out
}

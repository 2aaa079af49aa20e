package api

// HookAccepted is the answer to an accepted webhook (POST /hooks/{registry},
// 202 Accepted): what the request's events made, once the reconcile
// message that carries them is published. A request whose events concern
// nothing the registry selects is accepted too, with Enqueued false.
type HookAccepted struct {
	Registry string `json:"registry"`
	// Kind is the payload as it was read: distribution, harbor, github,
	// gitlab, quay or entries.
	Kind string `json:"kind"`
	// Events is how many events the payload held.
	Events int `json:"events"`
	// Enqueued says whether a published reconcile message carries the
	// request's events.
	Enqueued bool `json:"enqueued"`
	// Entries are the entries the request's events name, sorted; empty
	// when nothing was enqueued or the whole registry was.
	Entries []string `json:"entries"`
	// WholeRegistry says the message reconciles the whole registry: its
	// source names no entries from an event (http, dir), or the payload
	// asked for all of it.
	WholeRegistry bool `json:"whole_registry,omitempty"`
	// Coalesced says the message also carries other requests' events:
	// it was published when the registry's coalescing window closed.
	Coalesced bool `json:"coalesced,omitempty"`
	// Description says what happened, and why nothing was enqueued when
	// nothing was.
	Description string `json:"description"`
}

package api

import (
	"time"

	"github.com/specsync/specsync/pkg/catalog"
)

// The change feed (GET /v2/catalog/changes, and the changes Pub/Sub
// topic's messages).

// RevisionHeader is the response header that names the catalog revision a
// /v2/catalog body reflects (at least: it may already show changes the feed
// delivers after R, and applying those again is harmless).
const RevisionHeader = "X-Catalog-Revision"

// EpochHeader names the store a catalog revision belongs to (GET
// /v2/catalog and the change feed): a store that is recreated or
// restored gets another epoch, and its revisions start again. A watcher
// sends it back as the feed's epoch parameter; another store's epoch is
// answered 410 Gone. Empty (absent) until the first commit of a store.
const EpochHeader = "X-Catalog-Epoch"

// Change is one committed catalog change as clients see it. It carries the
// whole new state of one service: Service when the service is in the
// catalog after the change, nothing when it left it.
type Change struct {
	Revision  int64      `json:"revision"`
	Kind      ChangeKind `json:"kind"`
	ServiceID string     `json:"service_id"`
	Registry  string     `json:"registry"`
	Name      string     `json:"name"`
	At        time.Time  `json:"at"`
	// Service is the OSB service object as /v2/catalog lists it after the
	// change; absent when the service is no longer in the catalog.
	Service *catalog.Service `json:"service,omitempty"`
	// HeldBack names a newer version the registry offers that was not
	// adopted, and the instances that block it.
	HeldBack *HeldBackSpec `json:"held_back,omitempty"`
	// Problem says why a service in the store is not in the catalog (its
	// stored spec does not render).
	Problem string `json:"problem,omitempty"`
}

// ChangePage is the body of GET /v2/catalog/changes.
type ChangePage struct {
	// Changes are in revision order (a list, never null).
	Changes []Change `json:"changes"`
	// Next is the since of the next request: the last revision returned,
	// or the request's since when nothing came.
	Next int64 `json:"next"`
	// Revision is the catalog revision this answer knows of.
	Revision int64 `json:"revision"`
	// Epoch is the store's epoch (EpochHeader): a watcher sends it back.
	Epoch string `json:"epoch,omitempty"`
}

// Gone is the feed's 410 body: an OSB error plus the revision to re-list
// at.
type Gone struct {
	Error       string `json:"error"`
	Description string `json:"description"`
	Revision    int64  `json:"revision"`
	// Epoch is the store's epoch: the watcher's, if it sent another, is
	// of a store that is gone.
	Epoch string `json:"epoch,omitempty"`
}

package api

// ViewList is the body of GET /admin/views: the broker's credentials as
// catalog views (never a password).
type ViewList struct {
	// Revision is the catalog revision the counts are of.
	Revision int64      `json:"revision"`
	Views    []ViewInfo `json:"views"`
}

// ViewInfo is one view: its name, the user name of its credential, its
// rules (none: the view holds every service) and how many services it
// holds at Revision.
type ViewInfo struct {
	Name     string   `json:"name"`
	Username string   `json:"username"`
	Rules    []string `json:"rules"`
	Services int      `json:"services"`
}

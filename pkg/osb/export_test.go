package osb

// LastRefresh says what the last revision read of the cache cost:
// "unchanged", "changes", or "full: <why>" (see current.how); "" before
// the first.
func (c *Cache) LastRefresh() string {
	if cur := c.cur.Load(); cur != nil {
		return cur.how
	}
	return ""
}

// Waiters is how many callers are waiting for the refresh in progress.
func (c *Cache) Waiters() int64 { return c.waiting.Load() }

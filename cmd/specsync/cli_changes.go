package main

// specsync changes: the catalog's change feed (GET /v2/catalog/changes).
// With --follow it is a watcher: it keeps the catalog in memory, applies
// each change (service present: put it; absent: remove its id), asks again
// from "next", and when the feed answers 410 Gone (the revision is no
// longer retained, is ahead of the catalog, or is of a store recreated
// since: another epoch) it re-lists /v2/catalog and resumes from that
// listing's X-Catalog-Revision and X-Catalog-Epoch.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
)

// rawPage is a page of the feed with each change kept as served: printed
// as it came with --output json, decoded as an api.Change otherwise.
type rawPage struct {
	api.ChangePage
	Changes []json.RawMessage `json:"changes"`
}

// watcher is the catalog as the changes rebuild it.
type watcher struct {
	a        *client
	services map[string]string // id -> name
	json     bool
	out      io.Writer
	// epoch is the store the watcher's revisions are of (X-Catalog-Epoch
	// of its listing, or of the feed's first answer), sent with every
	// request: "" until it knows one.
	epoch string
}

func cmdChanges(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("changes", flag.ContinueOnError)
	var c clientFlags
	c.register(fs)
	followF := fs.Bool("follow", false, "keep watching: long-poll the feed and print changes as they happen, until interrupted")
	fs.BoolVar(followF, "f", false, "shorthand for --follow")
	since := fs.Int64("since", -1, "start after this revision (default: 0 without --follow; the current catalog with --follow)")
	wait := fs.Duration("wait", 30*time.Second, "how long the server may hold each request open waiting for a change (--follow)")
	limit := fs.Int("limit", 500, "most changes per request")
	if err := noArgs(fs, args); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	if *limit < 1 {
		return usageError{"--limit must be at least 1"}
	}
	a := c.client(stderr)
	// A long poll must outlive its wait.
	if min := *wait + 15*time.Second; a.http.Timeout < min {
		a.http.Timeout = min
	}
	w := &watcher{a: a, services: map[string]string{}, json: c.json(), out: stdout}
	if !*followF {
		from := *since
		if from < 0 {
			from = 0
		}
		ans, err := a.do(ctx, http.MethodGet, w.url(from, 0, *limit), authBroker, http.StatusOK)
		if err != nil {
			return err
		}
		if c.json() {
			return printJSON(stdout, ans.body)
		}
		var page rawPage
		if err := ans.decode(&page); err != nil {
			return err
		}
		if !c.json() {
			w.header()
		}
		for _, raw := range page.Changes {
			if err := w.apply(raw, false); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "%s; catalog at revision %d; next: specsync changes --since %d\n", api.Count(len(page.Changes), "change", "changes"), page.Revision, page.Next)
		return nil
	}
	err := w.follow(ctx, *since, *wait, *limit)
	if errors.Is(err, context.Canceled) {
		return nil // interrupted: the normal end of --follow
	}
	return err
}

func (w *watcher) url(since int64, wait time.Duration, limit int) string {
	u := fmt.Sprintf("%s/v2/catalog/changes?since=%d&limit=%d", w.a.catalog, since, limit)
	if wait > 0 {
		u += "&wait=" + wait.String()
	}
	if w.epoch != "" {
		u += "&epoch=" + url.QueryEscape(w.epoch)
	}
	return u
}

func (w *watcher) header() {
	if !w.json {
		fmt.Fprintf(w.out, "%-8s %-20s %-10s %-28s %s\n", "REV", "AT", "KIND", "REGISTRY/NAME", "SERVICE ID")
	}
}

// relist reads the whole catalog and returns its revision.
func (w *watcher) relist(ctx context.Context, reason string) (int64, error) {
	ans, err := w.a.do(ctx, http.MethodGet, w.a.catalog+"/v2/catalog", authBroker, http.StatusOK)
	if err != nil {
		return 0, err
	}
	h := ans.header.Get(api.RevisionHeader)
	rev, err := strconv.ParseInt(h, 10, 64)
	if err != nil {
		return 0, withExit(ExitAPI, "GET /v2/catalog has no %s header (%q): this catalog has no change feed", api.RevisionHeader, h)
	}
	var cat catalog.Catalog
	if err := ans.decode(&cat); err != nil {
		return 0, err
	}
	w.epoch = ans.header.Get(api.EpochHeader)
	w.services = map[string]string{}
	for _, s := range cat.Services {
		w.services[s.ID] = s.Name
	}
	if w.json {
		_ = json.NewEncoder(w.out).Encode(map[string]any{"resync": true, "reason": reason, "revision": rev, "epoch": w.epoch, "services": len(cat.Services)})
	} else {
		fmt.Fprintf(w.out, "# listed the catalog (%s): revision %d, %s\n", reason, rev, api.Count(len(cat.Services), "service", "services"))
	}
	return rev, nil
}

func (w *watcher) follow(ctx context.Context, since int64, wait time.Duration, limit int) error {
	if since < 0 {
		rev, err := w.relist(ctx, "start")
		if err != nil {
			return err
		}
		since = rev
	}
	w.header()
	backoff := time.Second
	for {
		ans, err := w.a.do(ctx, http.MethodGet, w.url(since, wait, limit), authBroker, http.StatusOK, http.StatusGone)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if exitCode(err) == ExitAuth || (ans != nil && ans.status < 500 && ans.status != http.StatusTooManyRequests) {
				return err // retrying cannot help
			}
			w.a.log.Warn("change feed unavailable, retrying", "error", err, "retry_in", backoff.String())
			if !w.json {
				fmt.Fprintf(w.out, "# feed unavailable (%v); retrying in %s\n", err, backoff)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = time.Second
		if ans.status == http.StatusGone {
			reason := fmt.Sprintf("revision %d is not in the feed (410 Gone)", since)
			var gone api.Gone
			if json.Unmarshal(ans.body, &gone) == nil && w.epoch != "" && gone.Epoch != w.epoch {
				reason = fmt.Sprintf("the store was recreated or restored: epoch %s, not %s (410 Gone)", orNone(gone.Epoch), w.epoch)
			}
			rev, err := w.relist(ctx, reason)
			if err != nil {
				return err
			}
			since = rev
			continue
		}
		var page rawPage
		if err := ans.decode(&page); err != nil {
			return err
		}
		if w.epoch == "" {
			// Started from --since, or listed an empty store: the
			// revisions are this store's from now on.
			w.epoch = page.Epoch
		}
		for _, raw := range page.Changes {
			if err := w.apply(raw, true); err != nil {
				return err
			}
		}
		if page.Next > since {
			since = page.Next
		}
	}
}

// apply prints one change and applies it to the watcher's catalog.
func (w *watcher) apply(raw json.RawMessage, track bool) error {
	var c api.Change
	if err := json.Unmarshal(raw, &c); err != nil {
		return withExit(ExitAPI, "a change does not decode: %v", err)
	}
	if track {
		if c.Service != nil {
			w.services[c.ServiceID] = c.Name
		} else if c.Kind != api.ChangeHeldBack {
			delete(w.services, c.ServiceID)
		}
	}
	if w.json {
		_, err := fmt.Fprintf(w.out, "%s\n", compact(raw))
		return err
	}
	line := fmt.Sprintf("%-8d %-20s %-10s %-28s %s", c.Revision, c.At.UTC().Format("2006-01-02T15:04:05Z"), c.Kind, c.Registry+"/"+c.Name, c.ServiceID)
	if c.HeldBack != nil {
		line += "  held back: " + strings.Join(c.HeldBack.Blockers, "; ")
	}
	if track {
		line += fmt.Sprintf("  (%s)", api.Count(len(w.services), "service", "services"))
	}
	_, err := fmt.Fprintln(w.out, line)
	return err
}

func orNone(epoch string) string {
	if epoch == "" {
		return "none (nothing committed yet)"
	}
	return epoch
}

func compact(raw json.RawMessage) []byte {
	var b strings.Builder
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	enc := json.NewEncoder(&b)
	_ = enc.Encode(v)
	return []byte(strings.TrimRight(b.String(), "\n"))
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/stack"
	"github.com/specsync/specsync/examples"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
	"github.com/specsync/specsync/pkg/logging"
)

// cmdDemo shows specsync end to end on one machine, wired as in
// production: the local stack (emulators, a local OCI registry seeded with
// the example specs, the push subscription, every function), then a
// bootstrap over HTTP polled to the end, the catalog as an OSB client sees
// it, and a second bootstrap of the unchanged world, which writes nothing.
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	logLevel := fs.String("log-level", envOr("LOG_LEVEL", "warn"), "log level of the JSON logs on stderr (the functions' too)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// The functions read their log level from the environment, like in
	// Cloud Functions; the demo's narrative is on stdout.
	os.Setenv("LOG_LEVEL", *logLevel)
	fmt.Fprintln(stdout, "== starting the local stack: Firestore and Pub/Sub emulators, a local OCI registry, every function")
	s, err := stack.Start(ctx, stack.Options{Addr: "127.0.0.1:0", Logger: logging.New(stderr, *logLevel)})
	if err != nil {
		return err
	}
	defer func() {
		s.Close()
		fmt.Fprintln(stdout, "== stopped everything the demo started")
	}()
	fmt.Fprintf(stdout, "   serving on %s; OCI registry %s holds the example specs as labelled images\n", s.URL, s.Registry)
	c := &demoClient{base: s.URL, admin: s.AdminToken, user: s.BrokerUser, pass: s.BrokerPass, out: stdout}

	fmt.Fprintln(stdout, "\n== POST /bootstrap: the store is empty, every spec is created")
	if err := c.bootstrap(ctx); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\n== GET /v2/catalog, as an OSB platform sees it")
	etag, err := c.catalog(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\n== POST /bootstrap again: nothing changed upstream, so one read and no writes per registry")
	if err := c.bootstrap(ctx); err != nil {
		return err
	}
	status, err := c.get(ctx, "/v2/catalog", "broker", "If-None-Match", etag)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "   GET /v2/catalog with If-None-Match %s: %d (the catalog did not change)\n", etag, status)
	fmt.Fprintln(stdout, "\n== GET /v2/catalog/changes?since=0: the change feed a mirror follows")
	next, err := c.changes(ctx)
	if err != nil {
		return err
	}
	if len(s.Hooks) > 0 {
		fmt.Fprintln(stdout, "\n== a push upstream: the registry notifies specsync's webhook; a waiting watcher hears it, no bootstrap")
		if err := c.push(ctx, s.Registry, next); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout)
	return nil
}

// push pushes an edited example spec to the local registry, as a team
// would publish a new version, while a watcher waits on the change feed,
// and prints what the watcher hears and when.
func (c *demoClient) push(ctx context.Context, host string, since int64) error {
	content, err := fs.ReadFile(examples.Registry, examples.RegistryDir+"/redis.yaml")
	if err != nil {
		return err
	}
	edited := strings.Replace(string(content), "description: ", "description: Now with TLS. ", 1)
	type heard struct {
		resp *http.Response
		body []byte
		err  error
	}
	waited := make(chan heard, 1)
	go func() {
		resp, body, err := c.request(ctx, http.MethodGet, fmt.Sprintf("/v2/catalog/changes?since=%d&wait=30s", since), "broker")
		waited <- heard{resp, body, err}
	}()
	// The watcher is waiting before the push (the request is on its way;
	// a watcher that came late would still get the change, as a page).
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	repo := emulator.SeedRepository("redis.yaml")
	digest, err := emulator.PushSpecFile(ctx, host, repo, []byte(edited))
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "   pushed %s/%s:latest (%s), its description edited\n", host, repo, digest[:19])
	h := <-waited
	if h.err != nil {
		return h.err
	}
	if h.resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v2/catalog/changes: %d %s", h.resp.StatusCode, h.body)
	}
	var page api.ChangePage
	if err := json.Unmarshal(h.body, &page); err != nil {
		return err
	}
	if len(page.Changes) == 0 {
		return errors.New("the watcher heard nothing within 30s of the push")
	}
	for _, ch := range page.Changes {
		desc := ""
		if ch.Service != nil {
			desc = ch.Service.Description
		}
		fmt.Fprintf(c.out, "   the watcher heard revision %d: %s %s, %q, %.1fs after the push\n", ch.Revision, ch.Kind, ch.Name, desc, time.Since(start).Seconds())
	}
	return nil
}

type demoClient struct {
	base, admin, user, pass string
	out                     io.Writer
}

func (c *demoClient) request(ctx context.Context, method, path, auth string, headers ...string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return nil, nil, err
	}
	if auth == "admin" {
		req.Header.Set("Authorization", "Bearer "+c.admin)
	} else {
		req.SetBasicAuth(c.user, c.pass)
		req.Header.Set("X-Broker-API-Version", "2.17")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

func (c *demoClient) get(ctx context.Context, path, auth string, headers ...string) (int, error) {
	resp, _, err := c.request(ctx, http.MethodGet, path, auth, headers...)
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

func (c *demoClient) bootstrap(ctx context.Context) error {
	resp, body, err := c.request(ctx, http.MethodPost, "/bootstrap", "admin")
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST /bootstrap: %d %s", resp.StatusCode, body)
	}
	var start api.BootstrapAccepted
	if err := json.Unmarshal(body, &start); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "   202 Accepted, operation %s, Location %s\n", start.Operation, resp.Header.Get("Location"))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, body, err := c.request(ctx, http.MethodGet, resp.Header.Get("Location"), "admin")
		if err != nil {
			return err
		}
		var op api.LastOperation
		if err := json.Unmarshal(body, &op); err != nil {
			return fmt.Errorf("last_operation: %d %s", resp.StatusCode, body)
		}
		fmt.Fprintf(c.out, "   last_operation: %s (%s)\n", op.State, op.Description)
		if op.State != api.InProgress {
			names := make([]string, 0, len(op.Registries))
			for n := range op.Registries {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				r := op.Registries[n]
				fmt.Fprintf(c.out, "   registry %s: %s; created %d, updated %d, unchanged %d, marked %d, deleted %d, entry errors %d; firestore %s, %s\n",
					n, r.Result, r.Counts.Created, r.Counts.Updated, r.Counts.Unchanged, r.Counts.Marked, r.Counts.Deleted, r.Counts.EntryErrors,
					api.Count(int(r.Firestore.Reads), "read", "reads"), api.Count(int(r.Firestore.Writes), "write", "writes"))
				if r.Error != "" {
					fmt.Fprintf(c.out, "     error: %s\n", r.Error)
				}
			}
			if op.State != api.Succeeded {
				return fmt.Errorf("bootstrap %s", op.State)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bootstrap still in progress after 2 minutes")
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (c *demoClient) catalog(ctx context.Context) (string, error) {
	resp, body, err := c.request(ctx, http.MethodGet, "/v2/catalog", "broker")
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /v2/catalog: %d %s", resp.StatusCode, body)
	}
	var cat catalog.Catalog
	if err := json.Unmarshal(body, &cat); err != nil {
		return "", err
	}
	fmt.Fprintf(c.out, "   200 OK, ETag %s, %s, %s\n", resp.Header.Get("ETag"), api.Count(len(cat.Services), "service", "services"), api.Count(len(body), "byte", "bytes"))
	for _, svc := range cat.Services {
		plans := make([]string, len(svc.Plans))
		for i, p := range svc.Plans {
			plans[i] = p.Name
			if p.Schemas != nil {
				plans[i] += "*"
			}
		}
		var platforms []string
		if ps, ok := svc.Metadata["platforms"].([]any); ok {
			for _, p := range ps {
				platforms = append(platforms, fmt.Sprint(p))
			}
		}
		fmt.Fprintf(c.out, "   %-16s %s  plans %-22s platforms %s\n", svc.Name, svc.ID, strings.Join(plans, ","), strings.Join(platforms, ","))
	}
	fmt.Fprintln(c.out, "   (* = plan with parameter schemas)")
	return resp.Header.Get("ETag"), nil
}

// changes prints the change feed from the start and returns where a
// watcher goes on from.
func (c *demoClient) changes(ctx context.Context) (int64, error) {
	resp, body, err := c.request(ctx, http.MethodGet, "/v2/catalog/changes?since=0", "broker")
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /v2/catalog/changes: %d %s", resp.StatusCode, body)
	}
	var page api.ChangePage
	if err := json.Unmarshal(body, &page); err != nil {
		return 0, err
	}
	for _, ch := range page.Changes {
		fmt.Fprintf(c.out, "   revision %-3d %-9s %-16s (registry %s, carries the service: %v)\n", ch.Revision, ch.Kind, ch.Name, ch.Registry, ch.Service != nil)
	}
	fmt.Fprintf(c.out, "   next: GET /v2/catalog/changes?since=%d&wait=30s (%s %s)\n", page.Next, api.RevisionHeader, resp.Header.Get(api.RevisionHeader))
	return page.Next, nil
}

package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/catalog"
)

// rawChange is a change with its service kept as served: the watcher
// mirrors the JSON documents themselves and compares them with what
// /v2/catalog lists.
type rawChange struct {
	api.Change
	Service json.RawMessage `json:"service"`
}

// rawPage is a page of the feed of rawChanges.
type rawPage struct {
	api.ChangePage
	Changes []rawChange `json:"changes"`
}

// watcher mirrors the catalog the way docs/api.md#the-change-feed tells
// clients to: list /v2/catalog, then follow the feed from its
// X-Catalog-Revision, putting or removing services; on 410 it lists again.
type watcher struct {
	url      string
	client   *http.Client
	mu       sync.Mutex
	services map[string]json.RawMessage
	since    int64
	seen     []int64 // every revision applied, in order
	relists  int
}

func (w *watcher) get(path string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, w.url+path, nil)
	if err != nil {
		return nil, nil, err
	}
	req.SetBasicAuth(brokerUser, brokerPass)
	req.Header.Set("X-Broker-API-Version", "2.17")
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return resp, buf.Bytes(), err
}

func (w *watcher) list() error {
	resp, body, err := w.get("/v2/catalog")
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("list: %d %s", resp.StatusCode, body)
	}
	rev, err := strconv.ParseInt(resp.Header.Get(api.RevisionHeader), 10, 64)
	if err != nil {
		return fmt.Errorf("list: %s %q", api.RevisionHeader, resp.Header.Get(api.RevisionHeader))
	}
	var c struct {
		Services []json.RawMessage `json:"services"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.services = map[string]json.RawMessage{}
	for _, s := range c.Services {
		var svc catalog.Service
		_ = json.Unmarshal(s, &svc)
		w.services[svc.ID] = s
	}
	w.since = rev
	w.seen = nil
	w.relists++
	return nil
}

// step long-polls once and applies what came.
func (w *watcher) step(wait time.Duration) error {
	w.mu.Lock()
	since := w.since
	w.mu.Unlock()
	resp, body, err := w.get(fmt.Sprintf("/v2/catalog/changes?since=%d&wait=%s", since, wait))
	if err != nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusGone:
		return w.list()
	case http.StatusOK:
	default:
		return fmt.Errorf("changes since %d: %d %s", since, resp.StatusCode, body)
	}
	var p rawPage
	if err := json.Unmarshal(body, &p); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range p.Changes {
		if len(c.Service) > 0 && string(c.Service) != "null" {
			w.services[c.ServiceID] = c.Service
		} else {
			delete(w.services, c.ServiceID)
		}
		w.seen = append(w.seen, c.Revision)
	}
	w.since = p.Next
	return nil
}

func (w *watcher) state() (map[string]json.RawMessage, int64, []int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]json.RawMessage, len(w.services))
	for k, v := range w.services {
		out[k] = v
	}
	return out, w.since, append([]int64(nil), w.seen...)
}

// canonical re-encodes JSON so equal documents compare equal.
func canonical(t *testing.T, m map[string]json.RawMessage) map[string]any {
	t.Helper()
	out := map[string]any{}
	for k, v := range m {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			t.Fatal(err)
		}
		out[k] = x
	}
	return out
}

// A client that lists, then follows the feed while registries change, ends
// with exactly the catalog /v2/catalog serves; the revisions it sees are
// consecutive (no gaps, no duplicates); the Pub/Sub topic carries the same
// changes.
func TestE2EListThenWatch(t *testing.T) {
	t.Parallel()
	a, urlA := newIndex(t, "alpha", "beta")
	b, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB))

	ctx := context.Background()
	ps, err := pubsub.NewClient(ctx, s.project)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	subName := fmt.Sprintf("projects/%s/subscriptions/tail", s.project)
	if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: subName, Topic: fmt.Sprintf("projects/%s/topics/specsync-catalog-changes", s.project),
		EnableMessageOrdering: true, AckDeadlineSeconds: 60,
	}); err != nil {
		t.Fatal(err)
	}

	s.bootstrap()
	w := &watcher{url: s.url, client: &http.Client{Timeout: 30 * time.Second}}
	if err := w.list(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			if err := w.step(2 * time.Second); err != nil {
				errc <- err
				return
			}
		}
	}()

	// The world changes under the watcher.
	a.set(false, "alpha", "beta", "delta")
	s.bootstrap()
	a.set(false, "alpha", "delta") // beta marked
	b.set(false, "gamma", "epsilon")
	s.bootstrap()
	a.set(false, "alpha", "beta", "delta") // beta back
	s.bootstrap()
	b.set(false, "epsilon")
	s.bootstrap()

	final := s.do(http.MethodGet, "/v2/catalog", "broker", nil)
	rev, _ := strconv.ParseInt(final.header.Get(api.RevisionHeader), 10, 64)
	if rev == 0 {
		t.Fatalf("no X-Catalog-Revision on /v2/catalog: %v", final.header)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, since, _ := w.state(); since >= rev {
			break
		}
		if time.Now().After(deadline) {
			_, since, _ := w.state()
			t.Fatalf("watcher at revision %d, catalog at %d", since, rev)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	var c struct {
		Services []json.RawMessage `json:"services"`
	}
	final.json(t, &c)
	want := map[string]json.RawMessage{}
	for _, svc := range c.Services {
		var one catalog.Service
		_ = json.Unmarshal(svc, &one)
		want[one.ID] = svc
	}
	got, _, seen := w.state()
	if !reflect.DeepEqual(canonical(t, got), canonical(t, want)) {
		t.Fatalf("the watcher's catalog differs from /v2/catalog:\nwatcher %d services, catalog %d", len(got), len(want))
	}
	if w.relists != 1 {
		t.Fatalf("the watcher re-listed %d times, want 1 (the first list)", w.relists)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] != seen[i-1]+1 {
			t.Fatalf("revisions seen %v: gap or duplicate at %d", seen, i)
		}
	}
	if len(seen) == 0 || seen[len(seen)-1] != rev {
		t.Fatalf("revisions seen %v, catalog at %d", seen, rev)
	}

	// Pub/Sub: every revision from 1 to rev, each with its item.
	sub := ps.Subscriber(subName)
	var mu sync.Mutex
	pushed := map[int64]api.ChangeKind{}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	go func() {
		_ = sub.Receive(cctx, func(_ context.Context, m *pubsub.Message) {
			r, _ := strconv.ParseInt(m.Attributes["revision"], 10, 64)
			var it api.Change
			_ = json.Unmarshal(m.Data, &it)
			mu.Lock()
			if it.Revision == r {
				pushed[r] = it.Kind
			}
			n := len(pushed)
			mu.Unlock()
			m.Ack()
			if int64(n) >= rev {
				cancel()
			}
		})
	}()
	<-cctx.Done()
	mu.Lock()
	defer mu.Unlock()
	var revs []int64
	for r := range pushed {
		revs = append(revs, r)
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i] < revs[j] })
	if int64(len(revs)) != rev || revs[0] != 1 || revs[len(revs)-1] != rev {
		t.Fatalf("published revisions %v, want 1..%d", revs, rev)
	}
}

// A watcher whose revision the feed no longer holds gets 410 Gone with the
// current revision, re-lists, and resumes from there; a revision ahead of
// the catalog is 410 too; bad parameters are 400.
func TestE2EFeedGone(t *testing.T) {
	t.Parallel()
	_, urlA := newIndex(t, "alpha")
	_, urlB := newIndex(t, "gamma")
	s := startStack(t, twoIndexes(urlA, urlB), "SPECSYNC_CHANGE_RETENTION=1s", "SPECSYNC_PRUNE_INTERVAL=200ms")
	s.bootstrap()
	var gone api.Gone
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := s.do(http.MethodGet, "/v2/catalog/changes?since=0", "broker", nil)
		if r.status == http.StatusGone {
			r.json(t, &gone)
			break
		}
		if r.status != http.StatusOK {
			t.Fatalf("since=0: %d %s", r.status, r.body)
		}
		if time.Now().After(deadline) {
			t.Fatal("expired changes were never pruned")
		}
		time.Sleep(200 * time.Millisecond)
	}
	cat := s.do(http.MethodGet, "/v2/catalog", "broker", nil)
	if gone.Error != "Gone" || gone.Revision != 2 || cat.header.Get(api.RevisionHeader) != "2" {
		t.Fatalf("410 body %+v, catalog revision %q; want revision 2 (alpha and gamma created)", gone, cat.header.Get(api.RevisionHeader))
	}
	r := s.do(http.MethodGet, "/v2/catalog/changes?since=2&wait=0s", "broker", nil)
	var p api.ChangePage
	r.json(t, &p)
	if r.status != http.StatusOK || len(p.Changes) != 0 || p.Next != 2 {
		t.Fatalf("resume from the listed revision: %d %s", r.status, r.body)
	}
	start := time.Now()
	r = s.do(http.MethodGet, "/v2/catalog/changes?since=2&wait=1s", "broker", nil)
	if r.status != http.StatusOK || time.Since(start) < time.Second {
		t.Fatalf("long-poll without changes answered %d after %s", r.status, time.Since(start))
	}
	if r := s.do(http.MethodGet, "/v2/catalog/changes?since=9", "broker", nil); r.status != http.StatusGone {
		t.Fatalf("since ahead of the catalog: %d %s", r.status, r.body)
	}
	for _, q := range []string{"", "since=-1", "since=x", "since=0&wait=2h", "since=0&wait=soon", "since=0&limit=0", "since=0&follow=1"} {
		if r := s.do(http.MethodGet, "/v2/catalog/changes?"+q, "broker", nil); r.status != http.StatusBadRequest {
			t.Errorf("?%s: %d %s, want 400", q, r.status, r.body)
		}
	}
	if r := s.do(http.MethodGet, "/v2/catalog/changes?since=0", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("without credentials: %d", r.status)
	}
}

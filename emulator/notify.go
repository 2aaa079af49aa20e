package emulator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/specsync/specsync/pkg/logging"
)

// EventsMediaType is the media type of a distribution notification
// envelope.
const EventsMediaType = "application/vnd.docker.distribution.events.v1+json"

// Envelope is a CNCF distribution registry's notification body: what a
// registry configured with notifications.endpoints POSTs after it accepts
// a push or a delete (the "Notifications" page of distribution's
// documentation). Only the fields the local registry fills in are here.
type Envelope struct {
	Events []Event `json:"events"`
}

// Event is one notification of an Envelope.
type Event struct {
	ID        string    `json:"id"`
	Timestamp time.Time `json:"timestamp"`
	Action    string    `json:"action"` // push, delete
	Target    struct {
		MediaType  string `json:"mediaType,omitempty"`
		Size       int64  `json:"size,omitempty"`
		Digest     string `json:"digest,omitempty"`
		Repository string `json:"repository"`
		URL        string `json:"url,omitempty"`
		Tag        string `json:"tag,omitempty"`
	} `json:"target"`
	Request struct {
		ID        string `json:"id"`
		Host      string `json:"host"`
		Method    string `json:"method"`
		UserAgent string `json:"useragent,omitempty"`
	} `json:"request"`
	Source struct {
		Addr string `json:"addr"`
	} `json:"source"`
}

// notifier watches the registry's responses and, once Notify named an
// endpoint, sends one envelope per accepted manifest push or delete, in
// order, from a goroutine of its own (a push never waits for the
// endpoint), trying each a few times as distribution's endpoints do.
type notifier struct {
	addr string

	// quiet, while above zero, drops the events of the pushes and
	// deletes the registry accepts (Registry.Quietly).
	quiet atomic.Int32

	mu       sync.Mutex
	targets  []target
	log      *slog.Logger
	queue    chan Event
	done     chan struct{}
	stopOnce sync.Once
}

func newNotifier(addr string) *notifier {
	return &notifier{addr: addr, queue: make(chan Event, 1000), done: make(chan struct{})}
}

// target is one notification endpoint and the headers it is sent.
type target struct {
	endpoint string
	header   http.Header
}

// Notify makes the registry send a distribution notification envelope to
// endpoint, with header (an Authorization header, say), after every
// manifest push or delete it accepts from now on, as a distribution
// registry does to each of its notifications.endpoints. Failures are
// logged to log and the event dropped after a few tries, as a registry
// whose endpoint is down does.
func (r *Registry) Notify(endpoint string, header http.Header, log *slog.Logger) {
	n := r.notify
	n.mu.Lock()
	defer n.mu.Unlock()
	first := len(n.targets) == 0
	n.targets = append(n.targets, target{endpoint: endpoint, header: header.Clone()})
	if log != nil {
		n.log = log
	}
	if first {
		go n.send()
	}
}

// Quietly runs f with notifications off: the pushes and deletes the
// registry accepts meanwhile (f's, and any other client's) notify no
// endpoint. The local stack re-seeds the registry so before a bootstrap,
// which then finds the changes itself.
func (r *Registry) Quietly(f func() error) error {
	r.notify.quiet.Add(1)
	defer r.notify.quiet.Add(-1)
	return f()
}

// manifestPath splits /v2/<repository>/manifests/<reference>.
func manifestPath(path string) (repo, ref string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/manifests/")
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+len("/manifests/"):], true
}

func (n *notifier) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		repo, ref, isManifest := manifestPath(req.URL.Path)
		if !isManifest || (req.Method != http.MethodPut && req.Method != http.MethodDelete) {
			h.ServeHTTP(w, req)
			return
		}
		rec := &logging.StatusWriter{ResponseWriter: w}
		h.ServeHTTP(rec, req)
		if rec.Status < 200 || rec.Status > 299 {
			return
		}
		n.mu.Lock()
		on := len(n.targets) > 0
		n.mu.Unlock()
		if !on || n.quiet.Load() > 0 {
			return
		}
		var ev Event
		ev.ID, ev.Timestamp = newID(), time.Now().UTC()
		ev.Action = "push"
		if req.Method == http.MethodDelete {
			ev.Action = "delete"
		}
		ev.Target.Repository = repo
		if strings.HasPrefix(ref, "sha256:") {
			ev.Target.Digest = ref
		} else {
			ev.Target.Tag = ref
			ev.Target.Digest = rec.Header().Get("Docker-Content-Digest")
		}
		if ev.Action == "push" {
			ev.Target.MediaType = req.Header.Get("Content-Type")
			ev.Target.Size = req.ContentLength
		}
		if ev.Target.Digest != "" {
			ev.Target.URL = fmt.Sprintf("http://%s/v2/%s/manifests/%s", n.addr, repo, ev.Target.Digest)
		}
		ev.Request.ID, ev.Request.Host, ev.Request.Method, ev.Request.UserAgent = newID(), req.Host, req.Method, req.UserAgent()
		ev.Source.Addr = n.addr
		select {
		case n.queue <- ev:
		default:
			n.logger().Warn("registry notification queue full; event dropped", "repository", repo)
		}
	})
}

func (n *notifier) logger() *slog.Logger {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.log == nil {
		return slog.Default()
	}
	return n.log
}

// notifyAttempts is how long the notifier waits before each try of one
// envelope.
var notifyAttempts = []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}

func (n *notifier) send() {
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		var ev Event
		select {
		case <-n.done:
			return
		case ev = <-n.queue:
		}
		body, err := json.Marshal(Envelope{Events: []Event{ev}})
		if err != nil {
			n.logger().Error("registry notification does not encode", "error", err)
			continue
		}
		n.mu.Lock()
		targets := slices.Clone(n.targets)
		n.mu.Unlock()
		for _, tg := range targets {
			var last error
			for _, wait := range notifyAttempts {
				select {
				case <-n.done:
					return
				case <-time.After(wait):
				}
				if last = post(client, tg.endpoint, tg.header, body); last == nil {
					break
				}
			}
			if last != nil {
				n.logger().Warn("registry notification not delivered", "endpoint", tg.endpoint, "repository", ev.Target.Repository, "tag", ev.Target.Tag, "error", last)
			}
		}
	}
}

func post(client *http.Client, endpoint string, header http.Header, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", EventsMediaType)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

func (n *notifier) stop() { n.stopOnce.Do(func() { close(n.done) }) }

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

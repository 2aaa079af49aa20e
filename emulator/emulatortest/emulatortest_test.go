package emulatortest

import (
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/emulator"
)

// TestMain provides the emulators when the tests were not started through
// withemulators, so that `go test ./emulator/...` tests these helpers too.
// Other packages' tests must not do this: one pair of emulators for the
// whole run is what keeps `make test` fast.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		started []*emulator.Process
		failed  bool
	)
	for env, start := range map[string]func(context.Context) (*emulator.Process, error){
		emulator.FirestoreEnv: emulator.StartFirestore,
		emulator.PubSubEnv: func(ctx context.Context) (*emulator.Process, error) {
			return emulator.StartPubSub(ctx, "emulatortest")
		},
	} {
		if os.Getenv(env) != "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := start(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				failed = true
				return
			}
			started = append(started, p)
			os.Setenv(env, p.Host)
		}()
	}
	wg.Wait()
	defer func() {
		for _, p := range started {
			if err := p.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}()
	if failed {
		return 1
	}
	return m.Run()
}

func TestFirestoreProjectsAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c1, p1 := FirestoreProject(t)
	c2, p2 := FirestoreProject(t)
	if p1 == p2 {
		t.Fatalf("two calls gave the same project %s", p1)
	}
	if _, err := c1.Collection("things").Doc("a").Set(ctx, map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	snap, err := c1.Collection("things").Doc("a").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := snap.DataAt("n"); n != int64(1) {
		t.Errorf("read back n = %v, want 1", n)
	}
	others, err := c2.Collection("things").Documents(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(others) != 0 {
		t.Errorf("project %s sees %d documents written in %s", p2, len(others), p1)
	}

	if err := emulator.ResetFirestore(ctx, os.Getenv(emulator.FirestoreEnv), p1); err != nil {
		t.Fatal(err)
	}
	left, err := c1.Collection("things").Documents(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("%d documents left after ResetFirestore", len(left))
	}
	if c := Firestore(t); c == nil {
		t.Error("Firestore returned nil")
	}
}

func TestPubSubRoundTrip(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, project := PubSub(t)
	if c.Project() != project {
		t.Errorf("client project %q, returned project %q", c.Project(), project)
	}
	topic := "projects/" + project + "/topics/reconcile"
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	sub := "projects/" + project + "/subscriptions/reconcile-sub"
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic}); err != nil {
		t.Fatal(err)
	}
	pub := c.Publisher(topic)
	defer pub.Stop()
	if _, err := pub.Publish(ctx, &pubsub.Message{Data: []byte("hello")}).Get(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	err := c.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		select {
		case got <- string(m.Data):
		default:
		}
		rcancel()
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "hello" {
			t.Errorf("received %q, want hello", s)
		}
	default:
		t.Error("Receive returned without a message")
	}

	// Another test's project does not see this topic.
	c2, p2 := PubSub(t)
	if _, err := c2.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: "projects/" + p2 + "/topics/reconcile"}); err == nil {
		t.Errorf("project %s sees a topic created in %s", p2, project)
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	r := Registry(t)
	digest, err := emulator.PushSpecImage(t.Context(), r.Host(), "specs/x", "latest", "bGFiZWw=", nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.Host() + "/specs/x:latest")
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != digest {
		t.Errorf("HEAD digest %s, pushed %s", desc.Digest, digest)
	}
}

var projectIDShape = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)

func TestProjectID(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, n := range []string{
		"short",
		"a very long subtest name that goes on and on well past thirty characters",
		"Ünïcödé & (punctuation)!!",
		"---",
		"ends-with-dash-at-the-cut----------",
	} {
		t.Run(n, func(t *testing.T) {
			for range 3 {
				id := ProjectID(t)
				if !projectIDShape.MatchString(id) {
					t.Errorf("ProjectID = %q, not a valid project id", id)
				}
				if strings.Contains(id, "--") {
					t.Errorf("ProjectID = %q has a run of dashes", id)
				}
				if seen[id] {
					t.Errorf("ProjectID = %q twice", id)
				}
				seen[id] = true
			}
		})
	}
	if id := ProjectID(t); !strings.HasPrefix(id, "test-testprojectid-") {
		t.Errorf("ProjectID(TestProjectID) = %q, want it to name the test", id)
	}
}

// fatalRecorder stands in for the test given to a helper so that the
// helper's t.Fatal can be observed instead of failing this test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func fatalOf(t *testing.T, helper func(testing.TB)) string {
	t.Helper()
	rec := &fatalRecorder{TB: t}
	done := make(chan bool)
	go func() {
		returned := false
		defer func() { done <- returned }()
		helper(rec)
		returned = true
	}()
	if <-done {
		t.Fatal("helper returned instead of failing the test")
	}
	return rec.msg
}

// Not parallel: it changes the environment the other tests need.
func TestHelpersFailWithoutEmulators(t *testing.T) {
	helpers := map[string]struct {
		env string
		fn  func(testing.TB)
	}{
		"Firestore":        {emulator.FirestoreEnv, func(tb testing.TB) { Firestore(tb) }},
		"FirestoreProject": {emulator.FirestoreEnv, func(tb testing.TB) { FirestoreProject(tb) }},
		"PubSub":           {emulator.PubSubEnv, func(tb testing.TB) { PubSub(tb) }},
	}
	for name, h := range helpers {
		t.Run(name+"/unset", func(t *testing.T) {
			t.Setenv(h.env, "")
			msg := fatalOf(t, h.fn)
			for _, want := range []string{h.env, "make test"} {
				if !strings.Contains(msg, want) {
					t.Errorf("fatal message %q lacks %q", msg, want)
				}
			}
		})
		t.Run(name+"/dead", func(t *testing.T) {
			t.Setenv(h.env, "127.0.0.1:1")
			msg := fatalOf(t, h.fn)
			if !strings.Contains(msg, "does not answer") || !strings.Contains(msg, "make test") {
				t.Errorf("fatal message %q", msg)
			}
		})
	}
}

// A refusing address refuses, and while it is held no server can bind
// it: a server asking for a free port is never given it.
func TestRefusingAddrRefusesAndCannotBeTaken(t *testing.T) {
	addr := RefusingAddr(t)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil || !strings.Contains(err.Error(), "connection refused") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("a server bound %s while it was held", addr)
	}
}

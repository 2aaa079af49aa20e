// Package emulatortest gives integration tests clients on the local
// emulators, each on a project of its own so tests can run in parallel
// without seeing each other's data.
//
// The Firestore and Pub/Sub helpers need the emulators that `make test`
// (go run ./emulator/cmd/withemulators -- go test ./...) starts. Without
// them they fail the test rather than skip it: a skipped integration test
// looks like a passing one.
package emulatortest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/specsync/specsync/emulator"
)

const runHint = "run the tests through `make test` (go run ./emulator/cmd/withemulators -- go test ./...), which starts the emulators"

// Firestore returns a client on the Firestore emulator for a project no
// other test uses.
func Firestore(t testing.TB) *firestore.Client {
	t.Helper()
	c, _ := FirestoreProject(t)
	return c
}

// FirestoreProject is Firestore that also returns the project id.
func FirestoreProject(t testing.TB) (*firestore.Client, string) {
	t.Helper()
	host := requireEmulator(t, emulator.FirestoreEnv)
	project := ProjectID(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := firestore.NewClient(ctx, project)
	if err != nil {
		t.Fatalf("firestore client on emulator %s: %v", host, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, project
}

// FirestoreVia is a client on project whose gRPC connection goes to addr
// (the emulator, or a proxy in front of it; "" is the emulator) through
// interceptor, which sees every unary call: the seam where a test fails a
// commit or counts the calls, on a real client against the real emulator.
// More dial options (a stream interceptor: TxWatch.Stream) may follow.
func FirestoreVia(t testing.TB, project, addr string, interceptor grpc.UnaryClientInterceptor, more ...grpc.DialOption) *firestore.Client {
	t.Helper()
	host := requireEmulator(t, emulator.FirestoreEnv)
	if addr == "" {
		addr = host
	}
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// The emulator treats the "owner" token as a privileged caller,
		// as the client library does when it dials the emulator itself.
		grpc.WithPerRPCCredentials(ownerCreds{}),
		grpc.WithUnaryInterceptor(interceptor)}, more...)...)
	if err != nil {
		t.Fatalf("grpc connection to %s: %v", addr, err)
	}
	c, err := firestore.NewClient(context.Background(), project, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatalf("firestore client via %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

type ownerCreds struct{}

func (ownerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}
func (ownerCreds) RequireTransportSecurity() bool { return false }

// PubSub returns a client on the Pub/Sub emulator for a project no other
// test uses, and that project id.
func PubSub(t testing.TB) (*pubsub.Client, string) {
	t.Helper()
	host := requireEmulator(t, emulator.PubSubEnv)
	project := ProjectID(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pubsub.NewClient(ctx, project)
	if err != nil {
		t.Fatalf("pubsub client on emulator %s: %v", host, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, project
}

// Registry starts an empty in-process OCI registry, closed when the test
// ends.
func Registry(t testing.TB) *emulator.Registry {
	t.Helper()
	r, err := emulator.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start OCI registry: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// requireEmulator fails the test unless env names an emulator that
// answers; a client pointed at nothing would otherwise hang until the
// test times out.
func requireEmulator(t testing.TB, env string) string {
	t.Helper()
	host := os.Getenv(env)
	if host == "" {
		t.Fatalf("%s is not set: %s", env, runHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !emulator.Ready(ctx, host) {
		t.Fatalf("%s=%s does not answer: %s", env, host, runHint)
	}
	return host
}

// ProjectID returns a fresh project id shaped like a real one (6 to 30 of
// [a-z0-9-], starting with a letter, not ending with a hyphen) derived from
// the test name, so the emulator's data for a test is recognisable.
func ProjectID(t testing.TB) string {
	const prefix, maxLen, suffixLen = "test-", 30, 8
	var b strings.Builder
	dash := true // suppresses a leading dash and runs of dashes
	for _, r := range strings.ToLower(t.Name()) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	name := b.String()
	if room := maxLen - len(prefix) - 1 - suffixLen; len(name) > room {
		name = name[:room]
	}
	name = strings.TrimRight(name, "-")
	var rnd [suffixLen / 2]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails
	if name == "" {
		return prefix + hex.EncodeToString(rnd[:])
	}
	return prefix + name + "-" + hex.EncodeToString(rnd[:])
}

// PushTopic creates topic id in project, and a push subscription to it
// that pushes to base + "/" + the topic's full name (the path
// functions-framework-go takes the topic from), with message ordering if
// ordered, the ack deadline given, and retries backing off from 100 ms to
// 1 s. It returns the topic's full name.
func PushTopic(t testing.TB, client *pubsub.Client, project, id, base string, ordered bool, ackDeadline time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := "projects/" + project + "/topics/" + id
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/" + id + "-push", Topic: topic,
		PushConfig:            &pubsubpb.PushConfig{PushEndpoint: base + "/" + topic},
		EnableMessageOrdering: ordered,
		AckDeadlineSeconds:    int32(ackDeadline / time.Second),
		RetryPolicy:           &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(100 * time.Millisecond), MaximumBackoff: durationpb.New(time.Second)},
	}); err != nil {
		t.Fatalf("create the push subscription of %s: %v", topic, err)
	}
	return topic
}

// ServerClockMoves returns once the emulator's server timestamps have
// moved past every write committed before it was called. Firestore's
// commit times are distinct for writes one after the other, to the
// microsecond; the emulator's server timestamps are not (it cuts them to
// the millisecond and repeats them for tens of milliseconds when it is
// loaded). A test whose writes must commit at distinct times, as they
// would in production (the committer orders changes by commit time, and
// ties by their writers' clocks, which such a test may skew), calls it
// between them. It writes and deletes one document of its own
// collection, test-clock.
func ServerClockMoves(t testing.TB, client *firestore.Client) {
	t.Helper()
	ctx := context.Background()
	probe := client.Collection("test-clock").Doc("probe")
	defer probe.Delete(ctx)
	var first time.Time
	for i := 0; ; i++ {
		if _, err := probe.Set(ctx, map[string]any{"at": firestore.ServerTimestamp}); err != nil {
			t.Fatalf("emulatortest: probe the server clock: %v", err)
		}
		snap, err := probe.Get(ctx)
		if err != nil {
			t.Fatalf("emulatortest: probe the server clock: %v", err)
		}
		at, _ := snap.Data()["at"].(time.Time)
		switch {
		case i == 0:
			first = at
		case at.After(first):
			return
		case i >= 1000:
			t.Fatalf("emulatortest: the server's timestamps stayed at %s for 1,000 writes", first)
		}
		time.Sleep(time.Millisecond)
	}
}

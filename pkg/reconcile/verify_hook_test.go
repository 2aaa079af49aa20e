package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/hooks"
	"github.com/specsync/specsync/pkg/queue"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// hookOf serves reg's webhook (bearer secret) publishing to a topic of
// the Pub/Sub emulator; next posts a body to it and returns the one
// reconcile message it published.
func hookOf(t *testing.T, reg reconcile.Registry) (next func(body string) queue.Message) {
	t.Helper()
	const secret = "verify-hook-secret-0123456789"
	file := filepath.Join(t.TempDir(), "hook-secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	client, project := emulatortest.PubSub(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic, sub := "projects/"+project+"/topics/reconcile", "projects/"+project+"/subscriptions/pull"
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic}); err != nil {
		t.Fatal(err)
	}
	pub := queue.NewPublisher(client, topic)
	t.Cleanup(pub.Stop)
	svc := hooks.New(hooks.Config{Publisher: pub, Window: time.Millisecond, Registries: []hooks.Registry{{
		Name: reg.Name, Source: reg.Source, Hook: &config.Hook{Type: config.HookBearer, SecretFile: file},
	}}})
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return func(body string) queue.Message {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/"+reg.Name, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		var ans api.HookAccepted
		if resp.StatusCode != http.StatusAccepted || json.Unmarshal(b.Bytes(), &ans) != nil || !ans.Enqueued {
			t.Fatalf("the hook answered %d %s, want an entry enqueued", resp.StatusCode, b.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The answer comes once the message is published.
		got, err := client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.ReceivedMessages) != 1 {
			t.Fatalf("the hook answered %s and published %d messages, want 1", b.String(), len(got.ReceivedMessages))
		}
		m := got.ReceivedMessages[0]
		if err := client.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: sub, AckIds: []string{m.AckId}}); err != nil {
			t.Fatal(err)
		}
		msg, err := queue.Decode(m.Message.Data)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
}

// envelope is the distribution registry's notification of a manifest
// push (tag empty: pushed by digest).
func envelope(repo, tag, digest string) string {
	return fmt.Sprintf(`{"events":[{"action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":%q,"tag":%q,"digest":%q}}]}`, repo, tag, digest)
}

// A signature pushed after the image publishes the spec through the
// webhook, at the cost of the change: an unsigned image is refused by a
// run (no spec, the catalog unchanged); signed, the registry's
// notification of the signature (cosign's sha256-<hex>.sig tag; or, for
// cosign v3's bundle on a registry without the referrers API, the bundle
// pushed by digest and the referrers tag schema's index) makes one
// message naming the repository's entry, never the signature's tag, and
// the run it asks for publishes the spec with who signed it. The same
// source (a warm instance) reads before and after: a refusal is never
// remembered. The invariant checker runs at the end (env).
func TestVerifySignaturePushedLaterPublishesThroughTheHook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	up := newUpstream(t)
	owner := verifytest.NewKey(t)
	up.push(t, "svc-a", specYAML("svc-a"))
	up.push(t, "svc-b", specYAML("svc-b"))
	src := up.verifiedSource(t, "team", verifytest.Policy(t, owner))
	rev := e.revision()
	run := e.run(src)
	if !run.Result.OK() || run.Counts.Created != 0 || run.Counts.EntryErrors != 2 {
		t.Fatalf("the unsigned run: %s %+v %s %v", run.Result, run.Counts, run.Error, run.Errors)
	}
	if got := e.revision(); got != rev || len(e.specs("team")) != 0 {
		t.Fatalf("unsigned images moved the catalog to revision %d (from %d), specs %v", got, rev, e.specs("team"))
	}
	post := hookOf(t, src)

	publishes := func(how, entry string, body string) {
		t.Helper()
		msg := post(body)
		if msg.Registry != "team" || len(msg.Entries) != 1 || msg.Entries[0] != entry {
			t.Fatalf("%s: the hook published %+v, want the entry %s", how, msg, entry)
		}
		rev := e.revision()
		// The run reads the entry's repository alone: no catalog page, no
		// request of another repository.
		var mu sync.Mutex
		var others []string
		up.setFail(func(r *http.Request) bool {
			if k := requestKind(r); k == reqCatalog || (k != reqPing && !strings.HasPrefix(r.URL.Path, "/v2/"+entry+"/")) {
				mu.Lock()
				others = append(others, r.Method+" "+r.URL.Path)
				mu.Unlock()
			}
			return false
		})
		run, err := e.runner.ReconcileEntries(context.Background(), src, msg.Entries)
		up.setFail(nil)
		e.commit()
		if len(others) != 0 {
			t.Errorf("%s: the run of %s also asked %v", how, entry, others)
		}
		if err != nil || run.Result != api.ResultSucceeded || run.Counts.Created != 1 {
			t.Fatalf("%s: the hook's run: %s %+v %s %v %v", how, run.Result, run.Counts, run.Error, run.Errors, err)
		}
		_, d := up.digest(t, entry)
		rec, ok := e.specs("team")[entry]
		if !ok {
			t.Fatalf("%s: %s not published", how, entry)
		}
		s, err := rec.Spec()
		if err != nil || s.Provenance == nil || s.Provenance.Key != owner.Fingerprint(t) || s.Provenance.Digest != d.String() {
			t.Fatalf("%s: %s published without its provenance (%+v, %v)", how, entry, s, err)
		}
		if e.revision() <= rev {
			t.Errorf("%s: the catalog stayed at revision %d", how, rev)
		}
	}

	// cosign v2: the .sig tag.
	repo, d := up.digest(t, "svc-a")
	owner.SignTag(t, repo, d)
	up.counts()
	publishes("the .sig tag", "svc-a", envelope("svc-a", "sha256-"+d.Hex+".sig", "sha256:"+strings.Repeat("5", 64)))
	if rec := e.specs("team")["svc-b"]; rec.ID != "" {
		t.Errorf("svc-b, still unsigned, was published")
	}

	// cosign v3: the bundle, a referrer pushed by digest, and the
	// referrers tag schema's index (the registry has no referrers API).
	repo, d = up.digest(t, "svc-b")
	owner.Sign(t, repo, d)
	idx, err := remote.Referrers(repo.Digest(d.String()))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("the referrers of svc-b: %v, %v", im, err)
	}
	index, err := remote.Head(repo.Tag("sha256-" + d.Hex))
	if err != nil {
		t.Fatal(err)
	}
	up.counts()
	publishes("the bundle and the referrers index", "svc-b", fmt.Sprintf(`{"events":[%s,%s]}`,
		strings.TrimSuffix(strings.TrimPrefix(envelope("svc-b", "", im.Manifests[0].Digest.String()), `{"events":[`), `]}`),
		strings.TrimSuffix(strings.TrimPrefix(envelope("svc-b", "sha256-"+d.Hex, index.Digest.String()), `{"events":[`), `]}`)))
}

// What an unsigned entry costs a run, so that its signature, pushed
// later, is found: a refusal is never reused, so every run that reads the
// registry looks its digest's signatures up again (on the reference
// registry, which lacks the referrers API: the referrers API, the
// referrers tag schema and cosign's .sig tag, three requests), and as
// its refusal keeps the tag lookups from showing the listing unchanged, a
// new instance also reads its manifest and config and the run's hints (a
// Firestore read more). The signed entries cost nothing more. Signed,
// the registry is back to an unchanged run's cost: no lookup, one read.
func TestVerifyUnsignedEntryCostsItsLookupsEachRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	up := newUpstream(t)
	owner := verifytest.NewKey(t)
	for _, n := range []string{"svc-a", "svc-b", "svc-c"} {
		up.push(t, n, specYAML(n))
		up.sign(t, owner, n)
	}
	up.push(t, "unsigned", specYAML("unsigned"))
	_, unsigned := up.digest(t, "unsigned")
	policy := verifytest.Policy(t, owner)
	warm := up.verifiedSource(t, "team", policy)
	if run := e.run(warm); run.Result != api.ResultSucceeded || run.Counts.Created != 3 {
		t.Fatalf("first run: %s %+v %s", run.Result, run.Counts, run.Error)
	}
	up.counts()
	measure := func(what string, src reconcile.Registry, want map[string]int, reads int64) {
		t.Helper()
		var mu sync.Mutex
		var others []string
		up.setFail(func(r *http.Request) bool {
			if requestKind(r) == reqSignature && !strings.Contains(r.URL.Path, unsigned.Hex) {
				mu.Lock()
				others = append(others, r.Method+" "+r.URL.Path)
				mu.Unlock()
			}
			return false
		})
		run, err := e.runner.Reconcile(context.Background(), src)
		up.setFail(nil)
		e.commit()
		got := up.counts()
		if err != nil || !run.Result.OK() || run.Counts.Updated+run.Counts.Created+run.Counts.Marked != 0 {
			t.Fatalf("%s: %s %+v %s %v", what, run.Result, run.Counts, run.Error, err)
		}
		for _, k := range []string{reqHead, reqGetManifest, reqGetBlob, reqSignature} {
			if got[k] != want[k] {
				t.Errorf("%s: %s %d, want %d (%s)", what, k, got[k], want[k], formatCounts(got))
			}
		}
		if len(others) != 0 {
			t.Errorf("%s: signatures of signed entries looked up again: %v", what, others)
		}
		if run.Ops.Reads != reads || run.Ops.Writes != 0 {
			t.Errorf("%s: Firestore %+v, want %d reads and no write", what, run.Ops, reads)
		}
		t.Logf("%s: %s; Firestore %+v", what, formatCounts(got), run.Ops)
	}
	for range 2 {
		measure("unsigned, warm", warm, map[string]int{reqHead: 4, reqSignature: 3}, 1)
		measure("unsigned, a new instance", up.verifiedSource(t, "team", policy), map[string]int{reqHead: 4, reqGetManifest: 1, reqGetBlob: 1, reqSignature: 3}, 2)
	}

	up.sign(t, owner, "unsigned")
	if run := e.run(warm); run.Counts.Created != 1 {
		t.Fatalf("signed: %s %+v %s", run.Result, run.Counts, run.Error)
	}
	up.counts()
	measure("signed, warm", warm, map[string]int{reqHead: 4}, 1)
	measure("signed, a new instance", up.verifiedSource(t, "team", policy), map[string]int{reqHead: 4}, 1)
}

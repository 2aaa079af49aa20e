package functions_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/hubs"
	"github.com/specsync/specsync/pkg/api"
)

// Secrets never travel, for the registries listed through an API of
// their own: a Docker Hub personal access token (read from a file), a
// GitHub token (read from the environment) and a Quay robot's token
// (from the environment) beside its OAuth token for the API (from a
// file), each a canary, the access tokens Docker Hub's API trades them
// for, the pull tokens of the token services, and the Basic encodings
// sent to them appear in no Firestore
// document, Pub/Sub message, log line or HTTP response, through a good
// bootstrap, a refused one whose APIs echo the credentials they were sent
// in their errors, and an outage.
func TestE2ESecretCanaryHubs(t *testing.T) {
	t.Parallel()
	canary := func(prefix string) string {
		buf := make([]byte, 16)
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		return prefix + "canary-" + hex.EncodeToString(buf)
	}
	pat, ghToken := canary("dckr_pat_"), canary("ghp_")
	quayRobotToken, quayOAuth := canary("QUAYROBOT"), canary("quayoauth")

	accounts := hubs.NewAccounts()
	accounts.Add("robot", pat)
	accounts.Add("octo", ghToken)
	accounts.Grant("acme", "robot")
	accounts.Grant("acme", "octo")
	hub, hubReg := hubs.NewDockerHub(accounts), hubs.NewDockerHubRegistry(accounts)
	gh, ghReg := hubs.NewGitHub(accounts), hubs.NewGHCRRegistry(accounts)
	hubReg.SetPrivate("acme", true)
	ghReg.SetPrivate("acme", true)
	hub.SetRepositories("acme")
	gh.SetPackages("acme", true)
	quay := hubs.NewQuay(nil)
	quay.AddRobot("acme+robot", quayRobotToken)
	quay.AddOAuthToken(quayOAuth, "acme")

	// Refused, the APIs echo what they were sent (listing: the bearer
	// token of the page request, Docker Hub's traded one included;
	// everything: the login's body too); down, they answer 503.
	const refuseListing, refuseAll = 1, 2
	var refuse atomic.Int32
	var down atomic.Bool
	front := func(h http.Handler) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case down.Load():
				http.Error(w, "down", http.StatusServiceUnavailable)
			case refuse.Load() == refuseAll || (refuse.Load() == refuseListing && r.URL.Path != "/v2/auth/token"):
				b, _ := io.ReadAll(r.Body)
				msg, _ := json.Marshal(fmt.Sprintf("refused %s %s", r.Header.Get("Authorization"), b))
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintf(w, `{"message":%s,"detail":%s}`, msg, msg)
			default:
				h.ServeHTTP(w, r)
			}
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	hubAPI, hubHost, ghAPI, ghHost, quayHost := front(hub), front(hubReg), front(gh), front(ghReg), front(quay)
	for _, push := range []struct {
		storage http.Handler
		add     func(string)
	}{
		{hubReg.Storage(), func(n string) { hub.Add("acme", hubs.HubRepository{Name: n, Private: true}) }},
		{ghReg.Storage(), func(n string) { gh.Add("acme", hubs.Package{Name: n, Visibility: "private"}) }},
		{quay.Storage(), func(n string) { quay.Add("acme", n, false) }},
	} {
		plain := httptest.NewServer(push.storage)
		t.Cleanup(plain.Close)
		for _, n := range []string{"db", "cache"} {
			label := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("name: %s\ndescription: the %s\nplans:\n  - name: p\n    description: p\n", n, n)))
			if _, err := emulator.PushSpecImage(context.Background(), strings.TrimPrefix(plain.URL, "http://"), "acme/"+n, "latest", label, nil); err != nil {
				t.Fatal(err)
			}
			push.add(n)
		}
	}
	patFile, quayFile := filepath.Join(t.TempDir(), "pat"), filepath.Join(t.TempDir(), "quay")
	for file, secret := range map[string]string{patFile: pat, quayFile: quayOAuth} {
		if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	s := startStack(t, fmt.Sprintf(`registries:
  - name: hub
    type: dockerhub
    dockerhub:
      namespace: acme
      api_url: %s
      host: %s
      insecure: true
      auth: {type: basic, username: robot, password_file: %q}
  - name: gh
    type: ghcr
    ghcr:
      owner: acme
      owner_type: org
      api_url: %s
      host: %s
      insecure: true
      auth: {type: token, token_env: SPECSYNC_E2E_GHCR_TOKEN}
  - name: quay
    type: quay
    quay:
      namespace: acme
      host: %s
      insecure: true
      auth: {type: basic, username: acme+robot, password_env: SPECSYNC_E2E_QUAY_ROBOT, token_file: %q}
`, hubAPI.URL, host(hubHost), patFile, ghAPI.URL, host(ghHost), host(quayHost), quayFile),
		"SPECSYNC_E2E_GHCR_TOKEN="+ghToken, "SPECSYNC_E2E_QUAY_ROBOT="+quayRobotToken)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps, err := pubsub.NewClient(ctx, s.project)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	subs := map[string]string{
		"projects/" + s.project + "/subscriptions/canary":         "projects/" + s.project + "/topics/reconcile-" + s.project,
		"projects/" + s.project + "/subscriptions/canary-changes": "projects/" + s.project + "/topics/specsync-catalog-changes",
		"projects/" + s.project + "/subscriptions/canary-commit":  "projects/" + s.project + "/topics/specsync-commit",
	}
	for sub, topic := range subs {
		if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic}); err != nil {
			t.Fatal(err)
		}
	}
	var responses strings.Builder
	record := func(r response) {
		responses.Write(r.body)
		for k, v := range r.header {
			responses.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
	}

	op := s.bootstrap()
	for _, name := range []string{"hub", "gh", "quay"} {
		if r := op.result(t, name); r.Result != api.ResultSucceeded || r.Counts.Created != 2 {
			t.Fatalf("%s with the right secret: %+v", name, r)
		}
	}
	for _, mode := range []int32{refuseListing, refuseAll} {
		refuse.Store(mode)
		op = s.bootstrap()
		for _, name := range []string{"hub", "gh", "quay"} {
			if r := op.result(t, name); r.Result != api.ResultFetchFailed || !strings.Contains(r.Error, "refused") || !strings.Contains(r.Error, "[REDACTED]") {
				t.Fatalf("%s refused (%d): %+v", name, mode, r)
			}
		}
	}
	refuse.Store(0)
	down.Store(true)
	op = s.bootstrap()
	for _, name := range []string{"hub", "gh", "quay"} {
		if r := op.result(t, name); r.Result != api.ResultFetchFailed {
			t.Fatalf("%s down: %+v", name, r)
		}
	}
	for _, path := range []string{"/registries", "/bootstrap/last_operation?operation=" + op.Operation} {
		record(s.do(http.MethodGet, path, "admin", nil))
	}
	record(s.do(http.MethodGet, "/v2/catalog", "broker", nil))
	record(s.do(http.MethodGet, "/v2/catalog/changes?since=0", "broker", nil))

	var published strings.Builder
	for sub := range subs {
		var got strings.Builder
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_ = ps.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
			got.Write(m.Data)
			for k, v := range m.Attributes {
				got.WriteString(k + "=" + v + "\n")
			}
			m.Ack()
		})
		rcancel()
		if got.Len() == 0 {
			t.Fatalf("no message was captured on %s: the Pub/Sub check would be vacuous", sub)
		}
		published.WriteString(got.String())
	}
	var stored strings.Builder
	fs, err := firestore.NewClient(ctx, s.project)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	colls, err := fs.Collections(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range colls {
		all, err := c.Documents(ctx).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range all {
			fmt.Fprintf(&stored, "%s %v\n", d.Ref.Path, d.Data())
		}
	}
	s.logsMu.Lock()
	logs := s.logs.String()
	s.logsMu.Unlock()
	if !strings.Contains(logs, `"hub"`) || !strings.Contains(logs, `"gh"`) || !strings.Contains(logs, `"quay"`) {
		t.Fatal("the stack's logs do not mention the registries: the log check would be vacuous")
	}

	secrets := map[string]string{"Docker Hub token": pat, "GitHub token": ghToken,
		"Basic robot":          base64.StdEncoding.EncodeToString([]byte("robot:" + pat)),
		"Basic x-access-token": base64.StdEncoding.EncodeToString([]byte("x-access-token:" + ghToken)),
		"Quay robot token":     quayRobotToken, "Quay OAuth token": quayOAuth,
		"Basic Quay robot": base64.StdEncoding.EncodeToString([]byte("acme+robot:" + quayRobotToken))}
	issued := append(append(append(hub.Issued(), hubReg.Issued()...), ghReg.Issued()...), quay.Issued()...)
	if len(hub.Issued()) == 0 || len(hubReg.Issued()) == 0 || len(ghReg.Issued()) == 0 || len(quay.Issued()) == 0 {
		t.Fatalf("issued %d API and %d+%d registry tokens: the token checks would be vacuous", len(hub.Issued()), len(hubReg.Issued()), len(ghReg.Issued()))
	}
	for i, tok := range issued {
		secrets[fmt.Sprintf("issued token %d", i)] = tok
	}
	for where, text := range map[string]string{"Firestore": stored.String(), "Pub/Sub": published.String(), "logs": logs, "HTTP responses": responses.String()} {
		for what, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("the %s leaked into %s", what, where)
			}
		}
	}
	// The refusal is still explained, without the secret.
	if !strings.Contains(stored.String(), "[REDACTED]") {
		t.Errorf("no recorded error shows a redaction: the echoing APIs were not heard")
	}
}

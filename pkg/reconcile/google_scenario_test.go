package reconcile_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/googletest"
	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/invariant"
	"github.com/specsync/specsync/pkg/reconcile"
	"github.com/specsync/specsync/pkg/registry"
	_ "github.com/specsync/specsync/pkg/registry/gcpauth" // auth type google's credentials, as the functions register them
	"github.com/specsync/specsync/pkg/store"
)

// lockedBuffer is a log sink the runner writes from its goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An Artifact Registry repository read with the function's own identity
// (auth type google; here a service account key file whose token server
// issues tokens that live 5 seconds, and a registry that takes only the
// current one): runs before and after a token expired both reconcile; a
// token server that is down fails the run and marks nothing; and no
// access token is ever stored, logged or put in an error (the tokens
// carry a canary the invariant checker looks for in every document).
func TestScenarioArtifactRegistryWithGoogleAuth(t *testing.T) {
	// Not parallel: the credentials are found through the environment.
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	canary := "canary-" + hex.EncodeToString(b)
	tokens := googletest.NewTokenServer(t, canary)
	tokens.SetLifetime(5 * time.Second)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", tokens.KeyFile(t))
	ar := googletest.NewRegistry(t, tokens)
	pushAR := func(repo, name string) {
		t.Helper()
		o := &ociServer{faults: &faults{}, host: ar.PushHost}
		o.pushSpec(t, "project/specs/"+repo, specYAML(name))
	}
	pushAR("postgres", "postgres")
	pushAR("redis", "redis")
	pushAR("team/kafka", "kafka")

	e := newEnv(t)
	e.end.Canaries = append(e.end.Canaries, canary)
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.runner.Logger, e.committer.Logger = logger, logger

	src, err := registry.NewOCI(registry.OCIConfig{Host: "europe-docker.pkg.dev", Prefix: "project/specs",
		Auth: registry.Auth{Type: registry.AuthGoogle}, Transport: googletest.Transport(ar.Server)})
	if err != nil {
		t.Fatal(err)
	}
	reg := reconcile.Registry{Name: "artifacts", Source: src, Policy: defaultPolicy}
	var errs []string
	run := func() store.Run {
		t.Helper()
		r := e.run(reg)
		errs = append(errs, r.Error)
		return r
	}

	first := run()
	wantResult(t, first, api.ResultSucceeded)
	if first.Counts.Created != 3 {
		t.Fatalf("first run created %d, want 3", first.Counts.Created)
	}

	// The token the first run used expires; a spec is added meanwhile.
	sleepPast(tokens.Issued()[0].Expiry)
	if _, valid := tokens.Current(); valid {
		t.Fatal("the first token has not expired")
	}
	pushAR("mysql", "mysql")
	second := run()
	wantResult(t, second, api.ResultSucceeded)
	if second.Counts.Created != 1 || second.Counts.Unchanged != 3 {
		t.Fatalf("run after the token expired: counts %+v, want 1 created and 3 unchanged", second.Counts)
	}
	if n := tokens.Requests(); n != 2 {
		t.Fatalf("%d token requests, want 2 (one per run: the tokens live less than the refresh window)", n)
	}
	before := e.specs("artifacts")
	rev := e.revision()

	// The token server is down: the run fails, nothing is marked.
	tokens.SetDown(true)
	down := run()
	wantResult(t, down, api.ResultFetchFailed)
	if down.Counts != (store.RunCounts{}) || down.Ops.Deletes != 0 {
		t.Fatalf("a run without a token changed specs: counts %+v, ops %+v", down.Counts, down.Ops)
	}
	after := e.specs("artifacts")
	if got := strings.Join(activeNames(after), ","); got != "kafka,mysql,postgres,redis" {
		t.Fatalf("during the token server's outage the catalog holds %s, want all four active", got)
	}
	for n, r := range after {
		if r.Digest != before[n].Digest || r.UpdatedAt != before[n].UpdatedAt {
			t.Fatalf("spec %s was written during the outage", n)
		}
	}
	if e.revision() != rev {
		t.Fatal("the catalog revision moved during the outage")
	}
	if st := e.status("artifacts"); !strings.Contains(st.LastRun.Error, "cannot fetch token") {
		t.Fatalf("the status does not say the token could not be had: %q", st.LastRun.Error)
	}
	// The failed run's status is overwritten by the next one: look now.
	invariant.Require(t, e.client, invariant.Options{Canaries: []string{canary}, Settled: true})

	tokens.SetDown(false)
	wantResult(t, run(), api.ResultSucceeded)

	issued := tokens.Issued()
	if len(issued) < 3 {
		t.Fatalf("%d tokens issued: the canary check would be thin", len(issued))
	}
	text := logs.String()
	if !strings.Contains(text, "artifacts") {
		t.Fatal("the logs do not mention the registry: the log check would be vacuous")
	}
	for where, s := range map[string]string{"logs": text, "run errors": strings.Join(errs, "\n")} {
		if strings.Contains(s, canary) {
			t.Errorf("an access token leaked into the %s", where)
		}
	}
}

func sleepPast(t time.Time) { time.Sleep(time.Until(t) + 100*time.Millisecond) }

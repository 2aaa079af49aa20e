package functions_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/registry/gittest"
)

// Secrets never travel, for the git source's two credential paths: a
// token (read from the environment, sent as x-access-token's password)
// and a GitHub App (a private key read from a file, the JWT it signs, the
// installation tokens GitHub issues for it). None appears in a Firestore
// document, a log line or an HTTP response of the stack, through a good
// bootstrap, one whose Git servers echo the credentials they refuse, and
// an outage.
func TestE2ESecretCanaryGit(t *testing.T) {
	t.Parallel()
	buf := make([]byte, 16)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	token := "ghp_canary-" + hex.EncodeToString(buf)
	spec := func(n string) *string {
		return gittest.Ptr(fmt.Sprintf("name: %s\ndescription: the %s\nplans:\n  - name: p\n    description: p\n", n, n))
	}
	withToken, withApp := gittest.NewRepo(t), gittest.NewRepo(t)
	for _, r := range []*gittest.Repo{withToken, withApp} {
		r.Commit(map[string]*string{"specs/db.yaml": spec("db"), "specs/cache.yaml": spec("cache")})
	}
	withToken.RequireBasic(registry.GitTokenUser, token)
	app := gittest.NewApp(t, 31337, 42, func(tok string) { withApp.RequireBasic(registry.GitTokenUser, tok) })
	withApp.RequireBasic(registry.GitTokenUser, "none issued yet")

	// Refused, the servers (GitHub's token endpoint too) echo the
	// Authorization header they were sent; down, they answer 503.
	var refuse, down atomic.Bool
	fault := func(w http.ResponseWriter, req *http.Request) bool {
		switch {
		case down.Load():
			http.Error(w, "down", http.StatusServiceUnavailable)
		case refuse.Load():
			// GitHub's shape of error, which the git server quotes whole.
			http.Error(w, fmt.Sprintf(`{"message":%q}`, "refused "+req.Header.Get("Authorization")), http.StatusUnauthorized)
		default:
			return false
		}
		return true
	}
	withToken.SetFault(fault)
	withApp.SetFault(fault)
	app.SetFault(fault)
	dir := t.TempDir()
	keyFile, caFile := filepath.Join(dir, "app.pem"), filepath.Join(dir, "ca.pem")
	for f, content := range map[string][]byte{keyFile: []byte(app.KeyPEM()), caFile: withToken.CertPEM()} {
		if err := os.WriteFile(f, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := startStack(t, fmt.Sprintf(`registries:
  - name: gtoken
    type: git
    git:
      url: %s
      ref: main
      paths: ["specs/*.yaml"]
      auth: {type: token, token_env: SPECSYNC_E2E_GIT_TOKEN}
  - name: gapp
    type: git
    git:
      url: %s
      ref: main
      paths: ["specs/*.yaml"]
      auth: {type: github_app, app_id: 31337, installation_id: 42, private_key_file: %q, api_url: %s}
`, withToken.URL(), withApp.URL(), keyFile, app.URL()),
		// The stack trusts the test servers' certificate (they share one).
		"SPECSYNC_E2E_GIT_TOKEN="+token, "SSL_CERT_FILE="+caFile)

	var responses strings.Builder
	record := func(r response) {
		responses.Write(r.body)
		for k, v := range r.header {
			responses.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
	}
	op := s.bootstrap()
	for _, name := range []string{"gtoken", "gapp"} {
		if r := op.result(t, name); r.Result != api.ResultSucceeded || r.Counts.Created != 2 {
			t.Fatalf("%s with the right credentials: %+v", name, r)
		}
	}
	// A new commit, so the next run reads past the refs.
	for _, r := range []*gittest.Repo{withToken, withApp} {
		r.Commit(map[string]*string{"specs/queue.yaml": spec("queue")})
	}
	// Twice: the git server refuses the installation token (which drops
	// it), then GitHub refuses the JWT asking for another.
	refuse.Store(true)
	for range 2 {
		op = s.bootstrap()
		for _, name := range []string{"gtoken", "gapp"} {
			if r := op.result(t, name); r.Result != api.ResultFetchFailed || !strings.Contains(r.Error, "refused") || !strings.Contains(r.Error, "[REDACTED]") {
				t.Fatalf("%s refused: %+v", name, r)
			}
		}
	}
	if r := op.result(t, "gapp"); !strings.Contains(r.Error, "installation token") {
		t.Fatalf("the second refusal is not GitHub's token endpoint's: %+v", r)
	}
	refuse.Store(false)
	down.Store(true)
	op = s.bootstrap()
	for _, name := range []string{"gtoken", "gapp"} {
		if r := op.result(t, name); r.Result != api.ResultFetchFailed {
			t.Fatalf("%s down: %+v", name, r)
		}
	}
	for _, path := range []string{"/registries", "/bootstrap/last_operation?operation=" + op.Operation} {
		record(s.do(http.MethodGet, path, "admin", nil))
	}
	record(s.do(http.MethodGet, "/v2/catalog", "broker", nil))

	ctx := context.Background()
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
	if !strings.Contains(logs, `"gtoken"`) || !strings.Contains(logs, `"gapp"`) {
		t.Fatal("the stack's logs do not mention the registries: the log check would be vacuous")
	}

	basic := func(pass string) string {
		return base64.StdEncoding.EncodeToString([]byte(registry.GitTokenUser + ":" + pass))
	}
	keyBody := strings.Split(strings.TrimSpace(app.KeyPEM()), "\n")[1]
	secrets := map[string]string{"token": token, "token's Basic": basic(token), "private key": keyBody}
	if len(app.Issued()) == 0 || len(app.JWTs()) == 0 {
		t.Fatalf("%d installation tokens, %d JWTs: the app's checks would be vacuous", len(app.Issued()), len(app.JWTs()))
	}
	for i, tok := range app.Issued() {
		secrets[fmt.Sprintf("installation token %d", i)] = tok
		secrets[fmt.Sprintf("installation token %d's Basic", i)] = basic(tok)
	}
	for i, jwt := range app.JWTs() {
		secrets[fmt.Sprintf("JWT %d", i)] = jwt
	}
	for where, text := range map[string]string{"Firestore": stored.String(), "logs": logs, "HTTP responses": responses.String()} {
		for what, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("the %s leaked into %s", what, where)
			}
		}
	}
	if !strings.Contains(stored.String(), "[REDACTED]") {
		t.Errorf("no recorded error shows a redaction: the echoing servers were not heard")
	}
}

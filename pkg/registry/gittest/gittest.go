// Package gittest stands in, in process, for a Git host: a repository
// served over Git's smart HTTP protocol by git's own http-backend
// (net/http/cgi) behind TLS, changed with the git binary from a work tree
// that pushes to it as a user would, with a Basic auth check, a request
// log and a fault hook in front; and GitHub's installation token endpoint,
// which checks a GitHub App's JWT with the app's public key. The tests of
// the git source, of the reconcile and of the functions share it. Test
// support only: no production code imports it.
package gittest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Repo is a served repository whose branch Branch the work tree pushes.
type Repo struct {
	t      testing.TB
	srv    *httptest.Server
	bare   string
	work   string
	Branch string

	mu       sync.Mutex
	requests []string // "METHOD /path?query"
	fault    func(w http.ResponseWriter, r *http.Request) bool
	user     string
	password string
	down     bool
}

// NewRepo serves a repository whose main branch has one empty commit.
func NewRepo(t testing.TB) *Repo {
	t.Helper()
	r := NewEmptyRepo(t)
	r.Commit(nil)
	return r
}

// NewEmptyRepo serves a repository without a commit.
func NewEmptyRepo(t testing.TB) *Repo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("gittest serves repositories with git http-backend: %v", err)
	}
	root := t.TempDir()
	r := &Repo{t: t, bare: filepath.Join(root, "srv", "specs.git"), work: filepath.Join(root, "work"), Branch: "main"}
	r.run(root, "init", "--quiet", "--bare", "--initial-branch=main", r.bare)
	r.run(root, "init", "--quiet", "--initial-branch=main", r.work)
	r.Git("remote", "add", "origin", r.bare)
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Dir(r.bare), "GIT_HTTP_EXPORT_ALL=1", "HOME=" + root},
		// Its complaints (no such repository, not our ref) reach the
		// client as the protocol says; the test's output need not repeat
		// them.
		Stderr: io.Discard,
	}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, req.Method+" "+req.URL.RequestURI())
		fault, down, user, pass := r.fault, r.down, r.user, r.password
		r.mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if fault != nil && fault(w, req) {
			return
		}
		if user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *Repo) run(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=specsync", "-c", "user.email=specsync@example.com",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Git runs git in the work tree and returns its output.
func (r *Repo) Git(args ...string) string {
	r.t.Helper()
	return r.run(r.work, args...)
}

// Commit writes files (a nil content removes one), commits and pushes
// the branch (forced); it returns the commit.
func (r *Repo) Commit(files map[string]*string) string {
	r.t.Helper()
	for p, content := range files {
		full := filepath.Join(r.work, filepath.FromSlash(p))
		if content == nil {
			if err := os.Remove(full); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(*content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.Git("add", "--all")
	r.Git("commit", "--quiet", "--allow-empty", "-m", "change")
	r.Git("push", "--quiet", "--force", "origin", "HEAD:refs/heads/"+r.Branch)
	return r.Git("rev-parse", "HEAD")
}

// ForcePushWithout rewrites the branch as one new commit without the
// paths: a force-push of a history the old commit is not in.
func (r *Repo) ForcePushWithout(paths ...string) {
	r.t.Helper()
	r.Git("checkout", "--quiet", "--orphan", fmt.Sprintf("rewritten-%d", time.Now().UnixNano()))
	for _, p := range paths {
		r.Git("rm", "--quiet", "-r", "--cached", p)
	}
	r.Git("commit", "--quiet", "--allow-empty", "-m", "rewrite")
	r.Git("push", "--quiet", "--force", "origin", "HEAD:refs/heads/"+r.Branch)
}

// Ptr is a file's content for Commit.
func Ptr(s string) *string { return &s }

// URL is the repository's https URL.
func (r *Repo) URL() string { return r.srv.URL + "/specs.git" }

// ServerURL is the server's base URL (another path is no repository).
func (r *Repo) ServerURL() string { return r.srv.URL }

// Transport trusts the server's certificate (and every httptest TLS
// server's: they share it).
func (r *Repo) Transport() http.RoundTripper { return r.srv.Client().Transport }

// CertPEM is the server's certificate, for a process that must trust it
// (SSL_CERT_FILE).
func (r *Repo) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
}

// SetDown makes every request a 503, or serves again.
func (r *Repo) SetDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

// SetFault puts f in front of every request; f answers the request
// itself when it returns true.
func (r *Repo) SetFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fault = f
}

// RequireBasic makes the server take only these Basic credentials
// (an empty user: none needed).
func (r *Repo) RequireBasic(user, password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user, r.password = user, password
}

// Requests returns the requests made since the last call.
func (r *Repo) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.requests
	r.requests = nil
	return out
}

// IsRefs reports whether a request is the refs' advertisement.
func IsRefs(req *http.Request) bool {
	return req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/info/refs")
}

// App is GitHub's installation token endpoint (POST
// /app/installations/{id}/access_tokens) for one app and installation:
// it checks the JWT's RS256 signature with the app's public key and its
// claims as GitHub documents them, and issues tokens of TTL.
type App struct {
	t       testing.TB
	srv     *httptest.Server
	key     *rsa.PrivateKey
	appID   int64
	install int64
	onIssue func(token string)

	mu     sync.Mutex
	ttl    time.Duration
	issued []string
	jwts   []string
	fault  func(w http.ResponseWriter, r *http.Request) bool
}

// SetFault puts f in front of every request; f answers the request
// itself when it returns true.
func (a *App) SetFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fault = f
}

// NewApp serves the endpoint; onIssue is told each token it issues (to
// make a Repo take it).
func NewApp(t testing.TB, appID, install int64, onIssue func(string)) *App {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	a := &App{t: t, key: key, appID: appID, install: install, ttl: time.Hour, onIssue: onIssue}
	a.srv = httptest.NewTLSServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

// URL is the API's base URL (auth.api_url).
func (a *App) URL() string { return a.srv.URL }

// KeyPEM is the app's private key as GitHub hands it out (PKCS #1).
func (a *App) KeyPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(a.key)}))
}

// SetTTL sets how long the tokens issued from now on last.
func (a *App) SetTTL(ttl time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ttl = ttl
}

// Issued are the tokens issued so far.
func (a *App) Issued() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.issued...)
}

// JWTs are the JWTs the endpoint was sent.
func (a *App) JWTs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.jwts...)
}

func (a *App) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != fmt.Sprintf("/app/installations/%d/access_tokens", a.install) {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	jwt, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	a.mu.Lock()
	a.jwts = append(a.jwts, jwt)
	fault := a.fault
	a.mu.Unlock()
	if fault != nil && fault(w, r) {
		return
	}
	if err := a.verify(jwt); !ok || err != nil {
		http.Error(w, fmt.Sprintf(`{"message":"A JSON web token could not be decoded: %v"}`, err), http.StatusUnauthorized)
		return
	}
	buf := make([]byte, 16)
	_, _ = rand.Read(buf)
	tok := "ghs_" + hex.EncodeToString(buf)
	a.mu.Lock()
	a.issued = append(a.issued, tok)
	ttl := a.ttl
	a.mu.Unlock()
	if a.onIssue != nil {
		a.onIssue(tok)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"token":%q,"expires_at":%q,"permissions":{"contents":"read"}}`, tok, time.Now().Add(ttl).UTC().Format(time.RFC3339))
}

// verify checks a JWT as GitHub does for an app: RS256 by the app's key,
// iss the app id, issued in the past, not expired, at most ten minutes
// long.
func (a *App) verify(jwt string) error {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return errors.New("not three parts")
	}
	var header struct{ Alg, Typ string }
	var claims struct {
		Iat, Exp int64
		Iss      string
	}
	for i, v := range []any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return err
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	now := time.Now().Unix()
	switch {
	case header.Alg != "RS256":
		return fmt.Errorf("alg %s", header.Alg)
	case rsa.VerifyPKCS1v15(&a.key.PublicKey, crypto.SHA256, sum[:], sig) != nil:
		return errors.New("signature")
	case claims.Iss != fmt.Sprint(a.appID):
		return fmt.Errorf("iss %q", claims.Iss)
	case claims.Iat > now || claims.Exp <= now || claims.Exp-claims.Iat > 600:
		return fmt.Errorf("iat %d exp %d now %d", claims.Iat, claims.Exp, now)
	}
	return nil
}

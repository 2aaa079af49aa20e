package googletest

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
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// CloudPlatform is the scope the token server requires.
const CloudPlatform = "https://www.googleapis.com/auth/cloud-platform"

// TokenServer is Google's OAuth2 token endpoint as a service account key
// file uses it (RFC 7523: grant_type
// urn:ietf:params:oauth:grant-type:jwt-bearer, the assertion a JWT signed
// with the key), and the metadata server's token endpoint as a function's
// service account uses it. It issues access tokens that live Lifetime,
// and checks every assertion: RS256 signature by the key, iss the service
// account, aud the token URI, the cloud-platform scope, a current exp.
type TokenServer struct {
	// URL is the token_uri of the key file.
	URL string
	// MetadataHost is host:port for GCE_METADATA_HOST.
	MetadataHost string
	// Email is the service account.
	Email string

	key    *rsa.PrivateKey
	prefix string

	mu       sync.Mutex
	lifetime time.Duration
	down     bool
	requests int
	issued   []Token
	refused  []string
}

// Token is an access token the server issued.
type Token struct {
	Value  string
	Expiry time.Time
}

// NewTokenServer starts a token server whose tokens start with
// "ya29."+prefix (a canary, so that a test can look for any of them).
func NewTokenServer(t testing.TB, prefix string) *TokenServer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &TokenServer{Email: "specsync-reconcile@specsync-test.iam.gserviceaccount.com", key: key, prefix: prefix, lifetime: time.Hour}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/token"
	s.MetadataHost = strings.TrimPrefix(srv.URL, "http://")
	return s
}

// SetLifetime sets how long the tokens issued from now on live.
func (s *TokenServer) SetLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lifetime = d
}

// SetDown makes the server drop every connection (down) or answer again.
func (s *TokenServer) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Requests is how many token requests the server answered with a token.
func (s *TokenServer) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Issued lists the tokens issued so far, oldest first.
func (s *TokenServer) Issued() []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// Refused lists why requests were refused (a bad assertion): a test of a
// good client expects none.
func (s *TokenServer) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refused)
}

// Current is the newest token issued, if it has not expired: the only one
// Registry accepts.
func (s *TokenServer) Current() (Token, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.issued) == 0 {
		return Token{}, false
	}
	last := s.issued[len(s.issued)-1]
	return last, time.Now().Before(last.Expiry)
}

// Rotate issues a token to no one, as a refresh by another holder of the
// credentials would: the token a client holds is stale from now on, and
// Registry refuses it.
func (s *TokenServer) Rotate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issue()
}

// issue makes a new token; s.mu is held.
func (s *TokenServer) issue() Token {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	tok := Token{
		Value:  "ya29." + s.prefix + "-" + strconv.Itoa(len(s.issued)+1) + "-" + hex.EncodeToString(b),
		Expiry: time.Now().Add(s.lifetime),
	}
	s.issued = append(s.issued, tok)
	return tok
}

// KeyFile writes a service account key file, as the IAM console hands it
// out but with token_uri pointing at the server, and returns its path.
func (s *TokenServer) KeyFile(t testing.TB) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(s.key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]string{
		"type":                        "service_account",
		"project_id":                  "specsync-test",
		"private_key_id":              "0123456789abcdef",
		"private_key":                 string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":                s.Email,
		"client_id":                   "104242424242424242424",
		"auth_uri":                    "https://accounts.google.com/o/oauth2/auth",
		"token_uri":                   s.URL,
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"universe_domain":             "googleapis.com",
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "service-account.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (s *TokenServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		// The connection drops, as to a server that is gone.
		panic(http.ErrAbortHandler)
	}
	switch r.URL.Path {
	case "/token":
		s.jwtBearer(w, r)
	case "/computeMetadata/v1/instance/service-accounts/default/token":
		s.metadata(w, r)
	default:
		http.NotFound(w, r)
	}
}

// jwtBearer answers the JWT-bearer grant.
func (s *TokenServer) jwtBearer(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		s.refuse(w, "invalid_request", err.Error())
		return
	}
	if g := r.PostForm.Get("grant_type"); g != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		s.refuse(w, "unsupported_grant_type", "grant_type "+g)
		return
	}
	if err := s.verify(r.PostForm.Get("assertion")); err != nil {
		s.refuse(w, "invalid_grant", err.Error())
		return
	}
	s.answer(w)
}

// metadata answers the metadata server's token request.
func (s *TokenServer) metadata(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata-Flavor") != "Google" {
		s.refuse(w, "invalid_request", "missing Metadata-Flavor: Google")
		return
	}
	if sc := r.URL.Query().Get("scopes"); sc != "" && !slices.Contains(strings.Split(sc, ","), CloudPlatform) {
		s.refuse(w, "invalid_scope", "scopes "+sc)
		return
	}
	s.answer(w)
}

func (s *TokenServer) answer(w http.ResponseWriter) {
	s.mu.Lock()
	s.requests++
	tok := s.issue()
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": tok.Value,
		"expires_in":   max(1, int(time.Until(tok.Expiry).Round(time.Second)/time.Second)),
		"token_type":   "Bearer",
	})
}

func (s *TokenServer) refuse(w http.ResponseWriter, code, why string) {
	s.mu.Lock()
	s.refused = append(s.refused, code+": "+why)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": why})
}

// verify checks a JWT-bearer assertion as Google's token endpoint does.
func (s *TokenServer) verify(assertion string) error {
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return fmt.Errorf("assertion has %d parts, want 3", len(parts))
	}
	var header struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
	}
	if err := decodeSegment(parts[0], &header); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if header.Alg != "RS256" {
		return fmt.Errorf("alg %q, want RS256", header.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&s.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("signature does not verify with the service account's key: %w", err)
	}
	var claims struct {
		Iss   string `json:"iss"`
		Aud   string `json:"aud"`
		Scope string `json:"scope"`
		Iat   int64  `json:"iat"`
		Exp   int64  `json:"exp"`
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return fmt.Errorf("claims: %w", err)
	}
	now := time.Now().Unix()
	switch {
	case claims.Iss != s.Email:
		return fmt.Errorf("iss %q is not the service account", claims.Iss)
	case claims.Aud != s.URL:
		return fmt.Errorf("aud %q is not the token URI", claims.Aud)
	case !slices.Contains(strings.Fields(claims.Scope), CloudPlatform):
		return fmt.Errorf("scope %q lacks %s", claims.Scope, CloudPlatform)
	case claims.Iat > now+60 || claims.Exp < now || claims.Exp-claims.Iat > 3600:
		return fmt.Errorf("iat %d, exp %d: not a current assertion of at most an hour", claims.Iat, claims.Exp)
	}
	return nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

package googletest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The token server is only a fair stand-in if it refuses what Google's
// token endpoint refuses: each broken assertion is refused and issues
// nothing; the good one gets a token.
func TestTokenServerChecksTheAssertion(t *testing.T) {
	t.Parallel()
	s := NewTokenServer(t, "check")
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	good := map[string]any{"iss": s.Email, "aud": s.URL, "scope": CloudPlatform, "iat": now, "exp": now + 3600}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range good {
			c[kk] = vv
		}
		c[k] = v
		return c
	}
	post := func(claims map[string]any, key *rsa.PrivateKey, grant string) int {
		h := seg(map[string]string{"alg": "RS256", "typ": "JWT"})
		body := h + "." + seg(claims)
		sum := sha256.Sum256([]byte(body))
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.PostForm(s.URL, url.Values{"grant_type": {grant}, "assertion": {body + "." + base64.RawURLEncoding.EncodeToString(sig)}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	for name, code := range map[string]int{
		"another key":     post(good, other, jwtBearer),
		"another issuer":  post(with("iss", "someone@else.iam.gserviceaccount.com"), s.key, jwtBearer),
		"another aud":     post(with("aud", "https://oauth2.googleapis.com/token"), s.key, jwtBearer),
		"no scope":        post(with("scope", "https://www.googleapis.com/auth/devstorage.read_only"), s.key, jwtBearer),
		"expired":         post(with("exp", now-10), s.key, jwtBearer),
		"another grant":   post(good, s.key, "client_credentials"),
		"longer than 1 h": post(with("exp", now+7200), s.key, jwtBearer),
	} {
		if code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, code)
		}
	}
	if n := s.Requests(); n != 0 {
		t.Fatalf("%d tokens issued for broken assertions", n)
	}
	if code := post(good, s.key, jwtBearer); code != http.StatusOK || s.Requests() != 1 {
		t.Fatalf("the good assertion: status %d, %d tokens", code, s.Requests())
	}
	if !strings.Contains(strings.Join(s.Refused(), "\n"), "signature does not verify") {
		t.Errorf("refusals %v do not name the signature", s.Refused())
	}
}

func seg(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

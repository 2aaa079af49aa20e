package hooks

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/config"
)

func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// A hook's secret is read on use: a file rotated while the instance runs
// is picked up after the refresh (zero here, so at once), the old secret
// is refused from then on, and a file that is missing, empty or too short
// refuses everything and says so in the log, naming the file and never a
// secret.
func TestVerifierReadsItsSecretOnUse(t *testing.T) {
	const (
		first  = "canary-first-hook-secret-0123456789"
		second = "canary-second-hook-secret-9876543210"
	)
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	v := newVerifier(config.Hook{Type: config.HookHMAC, SecretFile: file}, slog.New(slog.NewJSONHandler(&logs, nil)))
	v.refresh = 0
	body := []byte(`{"entries":["a"]}`)
	check := func(secret string) error {
		r := httptest.NewRequest("POST", "/hooks/a", bytes.NewReader(body))
		r.Header.Set(SignatureHeader, sign(secret, body))
		return v.verify(r, body)
	}

	write(first + "\n")
	if err := check(first); err != nil {
		t.Fatalf("the file's secret (with the newline echo leaves): %v", err)
	}
	write(second)
	if err := check(second); err != nil {
		t.Fatalf("the rotated secret: %v", err)
	}
	if err := check(first); err == nil {
		t.Fatal("the secret rotated away is still accepted")
	}
	for name, content := range map[string]*string{"empty": ptr(""), "too short": ptr("short"), "missing": nil} {
		if content == nil {
			_ = os.Remove(file)
		} else {
			write(*content)
		}
		logs.Reset()
		if err := check(""); err == nil {
			t.Errorf("%s file: a signature with the empty key is accepted", name)
		}
		if err := check("short"); err == nil && name == "too short" {
			t.Errorf("a secret under %d characters is accepted", MinSecretLength)
		}
		if !strings.Contains(logs.String(), "hook secret unusable") || !strings.Contains(logs.String(), file) {
			t.Errorf("%s file: the log does not say the secret is unusable: %s", name, logs.String())
		}
	}
	// Within a refresh, the file is read once: a burst costs no Secret
	// Manager access per request.
	write(first)
	v.refresh = 1 << 62
	v.readAt = time.Time{} // read it now, then keep it
	if err := check(first); err != nil {
		t.Fatal(err)
	}
	write(second)
	if err := check(first); err != nil {
		t.Errorf("within the refresh, the secret read is kept: %v", err)
	}

	t.Setenv("SPECSYNC_TEST_HOOK_TOKEN", first)
	b := newVerifier(config.Hook{Type: config.HookBearer, SecretEnv: "SPECSYNC_TEST_HOOK_TOKEN"}, slog.New(slog.NewJSONHandler(&logs, nil)))
	for _, c := range []struct {
		header string
		ok     bool
	}{
		{"Bearer " + first, true},
		{"Bearer " + second, false},
		{"bearer " + first, true}, // the scheme is case-insensitive (RFC 9110)
		{"Basic " + first, false},
		{first, false},
		{"", false},
	} {
		r := httptest.NewRequest("POST", "/hooks/a", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if err := b.verify(r, nil); (err == nil) != c.ok {
			t.Errorf("Authorization %q: %v, want accepted %v", c.header, err, c.ok)
		}
	}
	t.Setenv("SPECSYNC_TEST_HOOK_TOKEN", "")
	r := httptest.NewRequest("POST", "/hooks/a", nil)
	r.Header.Set("Authorization", "Bearer ")
	if err := b.verify(r, nil); err == nil {
		t.Error("an empty variable and an empty token: accepted")
	}
	if strings.Contains(logs.String(), first) || strings.Contains(logs.String(), second) {
		t.Errorf("a secret is in the log: %s", logs.String())
	}
}

func ptr(s string) *string { return &s }

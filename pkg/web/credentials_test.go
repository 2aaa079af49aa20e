package web_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsync/specsync/pkg/web"
)

func digest(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func TestMatchPlainAndSHA256(t *testing.T) {
	t.Parallel()
	const secret = "a-high-entropy-secret-0123456789"
	cases := []struct {
		name  string
		match func(string) bool
		ok    []string
		notOK []string
	}{
		{"plain", web.MatchPlain(secret), []string{secret}, []string{"", secret + "x", secret[1:], strings.ToUpper(secret)}},
		{"plain, empty want", web.MatchPlain(""), nil, []string{"", secret}},
		// Knowing the digest is not knowing the credential.
		{"sha256", web.MatchSHA256(digest(secret)), []string{secret}, []string{"", secret + "x", secret[1:], string(digest(secret)), hex.EncodeToString(digest(secret))}},
		{"sha256, short sum", web.MatchSHA256(digest(secret)[:16]), nil, []string{secret, ""}},
		{"sha256, no sum", web.MatchSHA256(nil), nil, []string{secret, ""}},
		{"sha256, none", web.MatchSHA256(), nil, []string{secret, ""}},
		// Rotating: the new and the retiring credential, nothing else.
		{"sha256, two sums", web.MatchSHA256(digest(secret), digest("retiring-"+secret)), []string{secret, "retiring-" + secret}, []string{"", "other", secret + "x"}},
	}
	for _, c := range cases {
		for _, v := range c.ok {
			if !c.match(v) {
				t.Errorf("%s: refuses the right credential", c.name)
			}
		}
		for _, v := range c.notOK {
			if c.match(v) {
				t.Errorf("%s: accepts %q", c.name, v)
			}
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A rotated secret (a new Secret Manager version in the mounted volume) is
// picked up within the refresh period, without a restart; before that the
// file is not read again.
func TestMatchFileRotation(t *testing.T) {
	t.Parallel()
	const old, rotated = "old-admin-token-0123456789", "new-admin-token-9876543210"
	path := filepath.Join(t.TempDir(), "token")
	write(t, path, old+"\n") // a trailing newline is not part of the secret
	quiet := slog.New(slog.NewTextHandler(&logBuffer{}, nil))

	cached := web.MatchFile(path, 16, time.Hour, quiet)
	fresh := web.MatchFile(path, 16, time.Millisecond, quiet)
	for name, m := range map[string]func(string) bool{"cached": cached, "fresh": fresh} {
		if !m(old) {
			t.Fatalf("%s: refuses the file's token", name)
		}
		if m(old+"\n") || m(rotated) || m("") {
			t.Errorf("%s: accepts a token the file does not hold", name)
		}
	}

	write(t, path, rotated)
	time.Sleep(20 * time.Millisecond)
	if !fresh(rotated) || fresh(old) {
		t.Error("after the refresh period the rotated token is not the one accepted")
	}
	if !cached(old) || cached(rotated) {
		t.Error("within the refresh period the file was read again (every request would be a Secret Manager access)")
	}
}

// A file that cannot be used accepts nothing, and says why, naming the
// file and never its content.
func TestMatchFileFailsClosed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const short = "short-secret"
	for name, setup := range map[string]func(path string){
		"missing": func(string) {},
		"empty":   func(p string) { write(t, p, "\n") },
		"short":   func(p string) { write(t, p, short) },
	} {
		path := filepath.Join(dir, name)
		setup(path)
		logs := &logBuffer{}
		m := web.MatchFile(path, 16, time.Hour, slog.New(slog.NewTextHandler(logs, nil)))
		for _, v := range []string{"", "\n", short, "anything-long-enough-0123456789"} {
			if m(v) {
				t.Errorf("%s file: accepts %q", name, v)
			}
		}
		out := logs.String()
		if !strings.Contains(out, path) {
			t.Errorf("%s file: the log does not name the file: %s", name, out)
		}
		if strings.Count(out, "credential file unusable") != 1 {
			t.Errorf("%s file: want one log line per refresh period, got: %s", name, out)
		}
		if strings.Contains(out, short) {
			t.Errorf("%s file: the log contains the file's content", name)
		}
	}
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

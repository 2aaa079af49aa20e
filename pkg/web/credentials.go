package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// A credential check says whether a presented credential (a password, a
// bearer token) is the expected one. Three ways to know the expected one:
//
//   - MatchPlain: the credential itself (local use, tests);
//   - MatchSHA256: only its SHA-256 digest, so the function holds no
//     secret at all (for a high-entropy credential the digest reveals
//     nothing usable: it is what the catalog gets in Google Cloud);
//   - MatchFile: a file holding it, re-read on use, so a new Secret
//     Manager version mounted as a volume is picked up without a redeploy.
//
// Every comparison is in constant time over SHA-256 digests, so neither
// the content nor the length of the expected credential leaks through
// timing.

// MatchPlain accepts exactly want; an empty want accepts nothing.
func MatchPlain(want string) func(presented string) bool {
	return func(got string) bool { return want != "" && EqualSecret(got, want) }
}

// MatchSHA256 accepts a credential whose SHA-256 digest is one of sums
// (32 bytes each; anything else accepts nothing). Two sums let a
// credential rotate: the new one and the one being retired. Every sum is
// compared, in constant time, whichever matches.
func MatchSHA256(sums ...[]byte) func(presented string) bool {
	want := make([][]byte, 0, len(sums))
	for _, s := range sums {
		if len(s) == sha256.Size {
			want = append(want, append([]byte(nil), s...))
		}
	}
	return func(got string) bool {
		h := sha256.Sum256([]byte(got))
		ok := 0
		for _, w := range want {
			ok |= subtle.ConstantTimeCompare(h[:], w)
		}
		return ok == 1
	}
}

// FileCredentialRefresh is how long MatchFile trusts what it read: a new
// secret version is accepted (and the old one refused) at most this long
// after it appears in the file. Each read of a Secret Manager volume is a
// Secret Manager access, so this also bounds those to two a minute per
// instance.
const FileCredentialRefresh = 30 * time.Second

// MatchFile accepts the credential held in the file at path (one trailing
// newline is not part of it). The file is read on use and what was read is
// trusted for refresh, so a rotated secret is picked up without a
// restart. A file that cannot be read, is empty or holds fewer than
// minLen characters accepts nothing (fail closed) and is logged, naming
// the file and never its content, at most once per refresh.
func MatchFile(path string, minLen int, refresh time.Duration, log *slog.Logger) func(presented string) bool {
	if log == nil {
		log = slog.Default()
	}
	f := &fileCredential{path: path, minLen: minLen, refresh: refresh, log: log}
	return f.match
}

type fileCredential struct {
	path    string
	minLen  int
	refresh time.Duration
	log     *slog.Logger

	mu     sync.Mutex
	sum    [sha256.Size]byte // digest of the current content; only meaningful when ok
	ok     bool
	readAt time.Time
}

func (f *fileCredential) current() (sum [sha256.Size]byte, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.readAt.IsZero() && time.Since(f.readAt) < f.refresh {
		return f.sum, f.ok
	}
	f.readAt = time.Now()
	v, err := f.read()
	if err != nil {
		f.sum, f.ok = [sha256.Size]byte{}, false
		f.log.Error("credential file unusable; refusing every credential until it is fixed", "file", f.path, "error", err)
		return f.sum, false
	}
	f.sum, f.ok = sha256.Sum256([]byte(v)), true
	return f.sum, true
}

func (f *fileCredential) read() (string, error) { return ReadCredentialFile(f.path, f.minLen) }

// ReadCredentialFile reads a secret from a file (a Secret Manager volume):
// the content without the trailing newline a hand-written file or echo
// leaves (a mount may or may not have one), refused when empty (a secret
// with no version yet) or shorter than minLen. The errors name the file
// and the reason, never the content. The broker's credential files and
// the webhooks' secrets are read by it.
func ReadCredentialFile(path string, minLen int) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		// The path error names the file and the reason, not the content.
		return "", err
	}
	v := strings.TrimRight(string(b), "\r\n")
	switch {
	case v == "":
		return "", fmt.Errorf("%s is empty (no secret version yet?)", path)
	case len(v) < minLen:
		return "", fmt.Errorf("%s holds fewer than %d characters", path, minLen)
	}
	return v, nil
}

func (f *fileCredential) match(got string) bool {
	sum, ok := f.current()
	if !ok {
		return false
	}
	h := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(h[:], sum[:]) == 1
}

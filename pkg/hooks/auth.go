package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/web"
)

// MinSecretLength is the shortest hook secret accepted: a secret that is
// shorter refuses every request (and says so in the log), as a short
// admin token file does.
const MinSecretLength = 16

// SignatureHeader carries GitHub's signature of a webhook's body.
const SignatureHeader = "X-Hub-Signature-256"

// verifier checks that a request comes from the registry whose hook it
// is. The secret is read on use: an environment variable each time (the
// value is fixed for the instance's life), a file at most once per
// refresh, like the admin token's file (web.MatchFile), so a rotated
// Secret Manager version is picked up without a redeploy while a burst of
// webhooks costs no Secret Manager access per request. The secret is
// held in memory only; it is never logged, put in an error or answered.
type verifier struct {
	hook    config.Hook
	refresh time.Duration
	log     *slog.Logger

	mu       sync.Mutex
	secret   string // the file's content, when ok
	ok       bool
	readAt   time.Time
	loggedAt time.Time // the last complaint about an unusable secret
}

func newVerifier(h config.Hook, log *slog.Logger) *verifier {
	return &verifier{hook: h, refresh: web.FileCredentialRefresh, log: log}
}

// errUnauthorized is a request the hook refuses; its text says what the
// caller got wrong (never what the secret is).
type errUnauthorized struct{ reason string }

func (e errUnauthorized) Error() string { return e.reason }

// current returns the secret, or ok false when it cannot be used (unset,
// unreadable, empty or too short), which refuses every request.
func (v *verifier) current() (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var (
		val string
		err error
	)
	if v.hook.SecretEnv != "" {
		val, err = readEnv(v.hook.SecretEnv)
	} else {
		if !v.readAt.IsZero() && time.Since(v.readAt) < v.refresh {
			return v.secret, v.ok
		}
		v.readAt = time.Now()
		val, err = readFile(v.hook.SecretFile)
		v.secret, v.ok = val, err == nil
	}
	if err != nil {
		// Once per refresh at most: a burst of webhooks must not flood
		// the log with the same complaint.
		if v.loggedAt.IsZero() || time.Since(v.loggedAt) >= v.refresh {
			v.loggedAt = time.Now()
			v.log.Error("hook secret unusable; refusing every request until it is fixed", "hook", v.hook.String(), "error", err)
		}
		return "", false
	}
	return val, true
}

func readEnv(name string) (string, error) {
	v, ok := os.LookupEnv(name)
	switch {
	case !ok:
		return "", fmt.Errorf("environment variable %s is not set", name)
	case v == "":
		return "", fmt.Errorf("environment variable %s is empty", name)
	case len(v) < MinSecretLength:
		return "", fmt.Errorf("environment variable %s holds fewer than %d characters", name, MinSecretLength)
	}
	return v, nil
}

func readFile(path string) (string, error) { return web.ReadCredentialFile(path, MinSecretLength) }

// Secret reads a hook's secret now, from its variable or its file, as the
// webhook checks it (for whoever must send it: the local stack's registry
// notifications).
func Secret(h config.Hook) (string, error) {
	if h.SecretEnv != "" {
		return readEnv(h.SecretEnv)
	}
	return readFile(h.SecretFile)
}

// verify checks a request and its raw body: for a bearer hook the
// Authorization header (compared as SHA-256 digests in constant time, so
// neither the content nor the length of the secret leaks through
// timing), for an hmac hook the signature of the body (hmac.Equal).
func (v *verifier) verify(r *http.Request, body []byte) error {
	switch v.hook.Type {
	case config.HookBearer:
		// The scheme is case-insensitive and a second Authorization
		// header is refused, never the first one taken (web.Authorization).
		scheme, token, err := web.Authorization(r)
		if err != nil {
			return errUnauthorized{err.Error()}
		}
		if !strings.EqualFold(scheme, "Bearer") || token == "" {
			return errUnauthorized{"the hook needs an Authorization: Bearer header with its secret"}
		}
		secret, usable := v.current()
		got, want := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(secret))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 || !usable {
			return errUnauthorized{"the bearer token is not the hook's secret"}
		}
		return nil
	case config.HookBasic:
		return v.verifyBasic(r)
	case config.HookHMAC:
		h := r.Header.Get(SignatureHeader)
		if h == "" {
			return errUnauthorized{"the hook needs an " + SignatureHeader + " header: sha256= and the HMAC-SHA256 of the body keyed with its secret"}
		}
		hexSig, ok := strings.CutPrefix(h, "sha256=")
		sig, err := hex.DecodeString(hexSig)
		if !ok || err != nil || len(sig) != sha256.Size {
			return errUnauthorized{SignatureHeader + " is not sha256= and 64 hexadecimal digits"}
		}
		secret, usable := v.current()
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		if !hmac.Equal(mac.Sum(nil), sig) || !usable {
			return errUnauthorized{"the signature does not match the body: a different secret, or a body changed on the way"}
		}
		return nil
	case config.HookGitLabToken:
		// One header, compared as the bearer token is; a second one is
		// refused rather than either taken.
		tokens := r.Header.Values(GitLabTokenHeader)
		if len(tokens) != 1 || tokens[0] == "" {
			return errUnauthorized{"the hook needs one " + GitLabTokenHeader + " header with its secret"}
		}
		secret, usable := v.current()
		sent, held := sha256.Sum256([]byte(tokens[0])), sha256.Sum256([]byte(secret))
		if subtle.ConstantTimeCompare(sent[:], held[:]) != 1 || !usable {
			return errUnauthorized{GitLabTokenHeader + " is not the hook's secret"}
		}
		return nil
	}
	// config.Hook.Validate admits no other type.
	return errors.New("hook type " + v.hook.Type + " cannot be checked")
}

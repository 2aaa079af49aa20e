package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"

	"golang.org/x/crypto/argon2"

	"github.com/specsync/specsync/pkg/failure"
)

// Parameters of a provision or bind may hold secrets (a spec's
// display_type password), and no secret is ever stored. Yet OSB wants a
// 409 when the same id is provisioned or bound again with different
// parameters, and a 200 when they are identical: so a record keeps a
// digest of them that answers "are these the same parameters?" and
// nothing else.
//
// A plain hash would not do: parameters are small, often guessable
// values, and anyone who could read the store could test guesses at
// billions a second. The digest is Argon2id (RFC 9106) of the canonical
// JSON of the parameters with a random salt per record, at OWASP's
// recommended cost (19 MiB, two passes): a guess costs tens of
// milliseconds and 19 MiB, and no two records share work. It is written
// in the PHC string format, so the cost can be raised later and records
// written before still verify.

// NoParameters is the parameters digest of a request that had none
// (absent, null or {}): nothing to protect, so no derivation is spent.
const NoParameters = "none"

// The Argon2id cost of new digests (OWASP's password storage cheat sheet:
// m=19 MiB, t=2, p=1), the salt and the key length.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonSalt    = 16
	argonKey     = 32
	argonVersion = argon2.Version
)

// kdfSlots bounds the derivations that run at once: each holds 19 MiB,
// and a catalog function instance that takes 80 requests at a time on one
// CPU would otherwise hold 80 of them; more at once than CPUs would not
// finish sooner anyway.
var kdfSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))

func derive(ctx context.Context, secret, salt []byte, time, memory uint32, threads uint8, keyLen uint32) ([]byte, error) {
	select {
	case kdfSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-kdfSlots }()
	return argon2.IDKey(secret, salt, time, memory, threads, keyLen), nil
}

// canonicalJSON is the canonical form of a JSON value: numbers as IEEE
// doubles in their shortest form, object keys sorted, no insignificant
// space (RFC 8785's rules, as encoding/json writes them), so that two
// encodings of the same value, however formatted or ordered, compare
// equal. Empty reports null or {}.
func canonicalJSON(raw []byte) (out []byte, empty bool, err error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, true, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false, failure.New(failure.Invalid, "parameters are not JSON: %v", err)
	}
	if m, ok := v.(map[string]any); v == nil || (ok && len(m) == 0) {
		return nil, true, nil
	}
	if out, err = json.Marshal(v); err != nil {
		return nil, false, failure.New(failure.Invalid, "parameters cannot be encoded: %v", err)
	}
	return out, false, nil
}

// digestParameters is the digest a new record keeps of the parameters of
// its request (raw JSON; nil when there were none).
func digestParameters(ctx context.Context, raw []byte) (string, error) {
	canon, empty, err := canonicalJSON(raw)
	if err != nil || empty {
		return NoParameters, err
	}
	salt := make([]byte, argonSalt)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	key, err := derive(ctx, canon, salt, argonTime, argonMemory, argonThreads, argonKey)
	if err != nil {
		return "", err
	}
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argonVersion, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// phc is a parsed Argon2id digest.
type phc struct {
	memory, time uint32
	threads      uint8
	salt, key    []byte
}

// parsePHC reads a digest digestParameters wrote.
func parsePHC(s string) (phc, error) {
	var p phc
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, fmt.Errorf("not an argon2id digest")
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argonVersion {
		return p, fmt.Errorf("argon2 version %q is not %d", parts[2], argonVersion)
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memory, &p.time, &p.threads); err != nil {
		return p, fmt.Errorf("argon2 parameters %q: %v", parts[3], err)
	}
	// What a digest may ask of a verification is bounded: a damaged or
	// planted record must not make the broker spend a gigabyte.
	if p.memory < argonMemory || p.memory > 256*1024 || p.time < 1 || p.time > 16 || p.threads < 1 || p.threads > 8 {
		return p, fmt.Errorf("argon2 cost m=%d,t=%d,p=%d is outside what this broker writes and verifies", p.memory, p.time, p.threads)
	}
	var err error
	b64 := base64.RawStdEncoding
	if p.salt, err = b64.DecodeString(parts[4]); err != nil || len(p.salt) < argonSalt {
		return p, fmt.Errorf("salt: need %d random bytes", argonSalt)
	}
	if p.key, err = b64.DecodeString(parts[5]); err != nil || len(p.key) < argonKey {
		return p, fmt.Errorf("key: need %d bytes", argonKey)
	}
	return p, nil
}

// CheckParametersDigest says what is wrong with a stored parameters
// digest: "" (a record from before digests were kept), NoParameters, or
// a salted Argon2id digest in PHC form are right; anything else (a bare
// hash, a value) is not.
func CheckParametersDigest(s string) error {
	if s == "" || s == NoParameters {
		return nil
	}
	_, err := parsePHC(s)
	return err
}

// sameParameters says whether raw (a request's parameters) are the ones
// digest was made of. A record without a digest (written before digests
// were kept) cannot tell, and says they are; so does one whose digest
// cannot be read (the invariant check reports it): a conflict the broker
// cannot prove would refuse a platform's retry forever.
func sameParameters(ctx context.Context, digest string, raw []byte) (bool, error) {
	canon, empty, err := canonicalJSON(raw)
	if err != nil {
		return false, err
	}
	if digest == NoParameters {
		return empty, nil
	}
	p, err := parsePHC(digest)
	if err != nil {
		return true, nil // "" or unreadable: unknown
	}
	if empty {
		return false, nil
	}
	key, err := derive(ctx, canon, p.salt, p.time, p.memory, p.threads, uint32(len(p.key)))
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(key, p.key) == 1, nil
}

// sameContext compares two OSB contexts as JSON values: a context that
// went through the store compares equal to the request it came from, and
// none equals {}.
func sameContext(a, b map[string]any) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return reflect.DeepEqual(a, b)
	}
	return bytes.Equal(ja, jb)
}

package registry

import (
	"context"
	"errors"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/pkg/verify/policy"
)

// Verifier checks the signatures of a manifest digest against a verify
// block with its key material read (pkg/verify's *Verifier). The
// registry knows it by this interface only, so that a binary that builds
// sources without fetching them (the operator CLI's config check) links
// no sigstore.
type Verifier interface {
	// Verify checks a signature of digest in repo, looked up with opts.
	// A refused entry is pkg/failure's Invalid holding a *policy.Rejection;
	// any other error is a lookup that failed.
	Verify(ctx context.Context, repo name.Repository, digest v1.Hash, opts ...remote.Option) (policy.Result, error)
	// Digest names what the verifier accepts; it goes in each entry's
	// Upstream.
	Digest() string
}

var (
	verifierMu     sync.RWMutex
	verifierLoader func(policy.Policy) (Verifier, error)
)

// RegisterVerifier makes load how a fetch loads its registry's verify
// block, as database/sql's drivers register: pkg/verify calls it from its
// init, and a binary that fetches imports pkg/verify for that. Registered
// twice, it panics: two verifiers would make which one runs depend on
// import order.
func RegisterVerifier(load func(policy.Policy) (Verifier, error)) {
	verifierMu.Lock()
	defer verifierMu.Unlock()
	if load == nil {
		panic("registry: RegisterVerifier with a nil load")
	}
	if verifierLoader != nil {
		panic("registry: RegisterVerifier called twice")
	}
	verifierLoader = load
}

// ErrVerifierNotLinked is the fetch's error for a verify block in a
// binary that does not link pkg/verify: the fetch fails whole rather than
// publish what was never checked. It carries no pkg/failure kind
// (unclassified: retried, nothing marked) because pkg/failure links gRPC,
// which the operator CLI must not.
var ErrVerifierNotLinked = errors.New("signature verification is not linked into this binary (a binary that fetches imports pkg/verify); refusing to fetch unverified")

// newVerifier loads p with the registered verifier.
func newVerifier(p policy.Policy) (Verifier, error) {
	verifierMu.RLock()
	load := verifierLoader
	verifierMu.RUnlock()
	if load == nil {
		return nil, ErrVerifierNotLinked
	}
	return load(p)
}

func verifierLinked() bool {
	verifierMu.RLock()
	defer verifierMu.RUnlock()
	return verifierLoader != nil
}

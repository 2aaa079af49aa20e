// Package policy is a registry's verify block and what verifying an
// entry yields, without the verifier: the shape, validation and results
// that `config check` and pkg/registry need. It imports no sigstore and
// no registry client, so that the operator CLI links neither; pkg/verify
// does the verifying and registers itself with pkg/registry (as
// database/sql's drivers do).
package policy

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Policy is a registry's verify block: whose signatures make an entry
// publishable. An entry is verified when one signature of its manifest
// digest satisfies one of the policies set (any configured key, or the
// keyless identity).
//
// Key material and the trusted root are only named here, as registry
// credentials are (*_env, *_file): they are read when a registry is
// fetched (pkg/verify's Load), never at load time, and terraform derives a secret for
// each name (SecretRefs).
type Policy struct {
	// Keys are cosign public keys (PEM, `cosign generate-key-pair`'s
	// cosign.pub): a signature made with any of them counts, so a key is
	// rotated by adding the new one before signing with it and removing
	// the old one after.
	Keys []Key `json:"keys,omitempty"`
	// Keyless accepts signatures made with a short-lived certificate
	// (cosign's keyless signing through Fulcio) whose identity and OIDC
	// issuer match.
	Keyless *Keyless `json:"keyless,omitempty"`
	// Provenance is for a Helm chart repository (a helm block with a
	// url), whose charts are archives, not OCI manifests: each chart
	// version's provenance file (helm package --sign's .prov beside the
	// archive) must be signed by a key of the keyring and name the
	// archive's SHA-256. It goes alone: keys and keyless check cosign
	// signatures, which no chart repository holds.
	Provenance *Provenance `json:"provenance,omitempty"`
}

// Provenance is the OpenPGP keyring a chart's .prov must be signed
// with: an environment variable or a file holding it (armored, as `gpg
// --export --armor` writes it, or binary). Exactly one is set. A keyring
// holds several keys: a key is rotated by adding the new one before
// signing with it and removing the old one after.
type Provenance struct {
	KeyringEnv  string `json:"keyring_env,omitempty"`
	KeyringFile string `json:"keyring_file,omitempty"`
}

// Key is one public key: an environment variable or a file holding its
// PEM. Exactly one is set.
type Key struct {
	PEMEnv  string `json:"pem_env,omitempty"`
	PEMFile string `json:"pem_file,omitempty"`
}

// Keyless is the identity a keyless signature must carry. Identity (the
// certificate's subject alternative name: a workflow URI, an email) and
// Issuer (the OIDC issuer that vouched for it) are each given exactly
// (Identity, Issuer) or as a regular expression matched against the whole
// value (IdentityRegexp, IssuerRegexp), as Flux's matchOIDCIdentity.
type Keyless struct {
	// TrustedRootFile is sigstore's trusted_root.json (Fulcio's
	// certificate authorities, Rekor's and the CT logs' keys, timestamp
	// authorities): a file, because a function cannot assume sigstore's
	// TUF repository is reachable (`cosign trusted-root create`, or the
	// trusted_root.json target of sigstore's TUF repository).
	TrustedRootFile string `json:"trusted_root_file"`
	Identity        string `json:"identity,omitempty"`
	IdentityRegexp  string `json:"identity_regexp,omitempty"`
	Issuer          string `json:"issuer,omitempty"`
	IssuerRegexp    string `json:"issuer_regexp,omitempty"`
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks the policy without reading any key or root: every
// problem, joined, each naming its field as the registries file writes it
// (verify.keys[1].pem_env, verify.keyless.identity_regexp) so that
// `config check` reports it at its line.
func (p Policy) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case len(p.Keys) == 0 && p.Keyless == nil && p.Provenance == nil:
		bad("verify: set keys, keyless or both (provenance for a helm chart repository): a verify block without a policy would refuse every entry")
	case p.Provenance != nil && (len(p.Keys) > 0 || p.Keyless != nil):
		bad("verify.provenance: not with keys or keyless: provenance checks a helm chart repository's .prov files, keys and keyless cosign signatures of OCI manifests, and no source has both")
	}
	if pv := p.Provenance; pv != nil {
		switch {
		case pv.KeyringEnv == "" && pv.KeyringFile == "":
			bad("verify.provenance: set keyring_env or keyring_file (where the OpenPGP public keyring is)")
		case pv.KeyringEnv != "" && pv.KeyringFile != "":
			bad("verify.provenance: keyring_env and keyring_file are both set; set only one")
		case pv.KeyringEnv != "" && !envName.MatchString(pv.KeyringEnv):
			bad("verify.provenance.keyring_env %q is not an environment variable name", pv.KeyringEnv)
		}
	}
	for i, k := range p.Keys {
		at := fmt.Sprintf("verify.keys[%d]", i)
		switch {
		case k.PEMEnv == "" && k.PEMFile == "":
			bad("%s: set pem_env or pem_file (where the public key's PEM is)", at)
		case k.PEMEnv != "" && k.PEMFile != "":
			bad("%s: pem_env and pem_file are both set; set only one", at)
		case k.PEMEnv != "" && !envName.MatchString(k.PEMEnv):
			bad("%s.pem_env %q is not an environment variable name", at, k.PEMEnv)
		}
	}
	if kl := p.Keyless; kl != nil {
		if kl.TrustedRootFile == "" {
			bad("verify.keyless: trusted_root_file is required: sigstore's trusted_root.json, since a function cannot assume sigstore's TUF repository is reachable")
		}
		for _, f := range []struct {
			what, exact, re, exactName, reName string
		}{
			{"identity", kl.Identity, kl.IdentityRegexp, "identity", "identity_regexp"},
			{"issuer", kl.Issuer, kl.IssuerRegexp, "issuer", "issuer_regexp"},
		} {
			switch {
			case f.exact == "" && f.re == "":
				bad("verify.keyless: %s or %s is required: which %s a signature must carry", f.exactName, f.reName, f.what)
			case f.exact != "" && f.re != "":
				bad("verify.keyless.%s: %s is set too; set only one", f.reName, f.exactName)
			case f.re != "":
				if _, err := regexp.Compile(Anchored(f.re)); err != nil {
					bad("verify.keyless.%s %q is not a regular expression: %v", f.reName, f.re, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Anchored makes a regular expression match whole values only: an
// identity regexp "https://github.com/org/.*" must not accept
// "https://evil.example/?https://github.com/org/x".
func Anchored(re string) string { return `^(?:` + re + `)$` }

// SecretRefs are the environment variables and files the policy names
// (key PEMs, the trusted root, the keyring): terraform makes a secret of each and
// gives it to the reconcile function (terraform/registries.tf).
func (p Policy) SecretRefs() (envs, files []string) {
	for _, k := range p.Keys {
		if k.PEMEnv != "" {
			envs = append(envs, k.PEMEnv)
		}
		if k.PEMFile != "" {
			files = append(files, k.PEMFile)
		}
	}
	if p.Keyless != nil && p.Keyless.TrustedRootFile != "" {
		files = append(files, p.Keyless.TrustedRootFile)
	}
	if pv := p.Provenance; pv != nil {
		if pv.KeyringEnv != "" {
			envs = append(envs, pv.KeyringEnv)
		}
		if pv.KeyringFile != "" {
			files = append(files, pv.KeyringFile)
		}
	}
	return envs, files
}

// String says what the policy accepts, for people: where each key is
// read from and the keyless identity, never key material.
func (p Policy) String() string {
	var parts []string
	for _, k := range p.Keys {
		if k.PEMEnv != "" {
			parts = append(parts, "key from env "+k.PEMEnv)
		} else {
			parts = append(parts, "key from file "+k.PEMFile)
		}
	}
	if kl := p.Keyless; kl != nil {
		id, iss := kl.Identity, kl.Issuer
		if id == "" {
			id = "/" + kl.IdentityRegexp + "/"
		}
		if iss == "" {
			iss = "/" + kl.IssuerRegexp + "/"
		}
		parts = append(parts, fmt.Sprintf("keyless %s from %s", id, iss))
	}
	if pv := p.Provenance; pv != nil {
		if pv.KeyringEnv != "" {
			parts = append(parts, "helm provenance, keyring from env "+pv.KeyringEnv)
		} else {
			parts = append(parts, "helm provenance, keyring from file "+pv.KeyringFile)
		}
	}
	return strings.Join(parts, "; ")
}

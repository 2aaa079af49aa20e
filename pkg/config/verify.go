package config

import (
	"errors"
	"fmt"

	"github.com/specsync/specsync/pkg/registry"
)

// notSigned says, by type, why a source's entries cannot be verified: a
// verify block on it is refused at load rather than silently meaning
// nothing. Every other source's entries are OCI manifests, whose
// signatures pkg/verify finds.
var notSigned = map[string]string{
	"http": "an http index's entries are documents, not OCI manifests: nothing signs them that verify could check",
	"dir":  "a dir source's spec files ship with the deployment: they are as trusted as the registries file itself",
	"git":  "a git source's entries are files of a commit, not OCI manifests: verify checks cosign signatures of manifests, not commit signatures",
}

// checkVerify checks a registry's verify block (pkg/verify's Policy):
// its own fields, and that its source's entries can carry signatures.
func checkVerify(r Registry) error {
	if r.Verify == nil {
		return nil
	}
	var errs []error
	if why, ok := notSigned[r.Type]; ok {
		errs = append(errs, fmt.Errorf("verify: not for a source of type %s: %s", r.Type, why))
	}
	// A chart repository's charts are archives, signed by the provenance
	// file beside each (Helm's .prov); every other signed source's
	// entries are OCI manifests, signed by cosign.
	if h, ok := r.Block().(*registry.HelmBlock); ok && h.URL != "" {
		if len(r.Verify.Keys) > 0 || r.Verify.Keyless != nil {
			errs = append(errs, errors.New("verify.keys and verify.keyless are not for a helm chart repository (a helm block with a url): its charts are archives, not OCI manifests; their .prov files are checked with verify.provenance's keyring"))
		}
	} else if _, ok := notSigned[r.Type]; !ok && r.Verify.Provenance != nil {
		errs = append(errs, fmt.Errorf("verify.provenance: not for a source of type %s: it checks the .prov files beside a helm chart repository's archives (a helm block with a url), and this source's entries are OCI manifests, signed with cosign: use verify.keys or verify.keyless", r.Type))
	}
	if err := r.Verify.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

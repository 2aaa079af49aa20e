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
	if h, ok := r.Block().(*registry.HelmBlock); ok && h.URL != "" {
		errs = append(errs, errors.New("verify: not for a helm chart repository (a helm block with a url): its charts are archives, not OCI manifests; verify applies to charts in an OCI registry (a helm block with a host)"))
	}
	if err := r.Verify.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

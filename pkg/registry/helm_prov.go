package registry

// Helm provenance: a chart repository's verify block (verify.provenance)
// offers a chart version only once the provenance file beside its
// archive (<archive URL>.prov, `helm package --sign`'s) is signed by a
// key of the keyring and names the archive's bytes (pkg/verify's
// VerifyProvenance). A refusal is that chart's error, exactly as an OCI
// manifest's (oci_verify.go): it keeps its last good version, is never
// marked for it, and has no Upstream, so the .prov is looked up again on
// every run that reads (it may be published after the archive). A .prov
// that cannot be fetched (a 5xx, a timeout) fails the fetch whole.
//
// What it costs stays with what moved, as for OCI: the policy's digest
// is in each chart's Upstream, so a hint stands for "verified under this
// policy" and an unchanged chart costs no .prov request, nor does a
// digest this instance verified before; the index's validator is kept
// with the policy's digest too (provenanceETag), so a policy that accepts
// something else never meets a 304 that would keep what it refuses.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/specsync/specsync/pkg/spec"
	"github.com/specsync/specsync/pkg/verify/policy"
)

// ProvenanceVerifier is a Verifier that checks Helm provenance files
// too (pkg/verify's *Verifier, with a verify.provenance keyring).
type ProvenanceVerifier interface {
	Verifier
	// VerifyProvenance checks prov, the provenance file of the archive
	// named file whose bytes have sum ("sha256:<hex>"). A refused chart
	// is an error holding a *policy.Rejection; any other error is a
	// verifier that could not check.
	VerifyProvenance(prov []byte, file, sum string) (policy.Result, error)
}

// maxProvBytes bounds a provenance file: a Chart.yaml (the spec's
// bound), the files map and an armored signature.
const maxProvBytes = maxChartYAMLBytes + 64<<10

// provenanceVerifier loads a chart repository's verify block, once a
// fetch (nil without one). Its error fails the fetch: a keyring that
// cannot be read, or a block a chart repository cannot honour.
func (h *Helm) provenanceVerifier() (ProvenanceVerifier, error) {
	p := h.cfg.Verify
	if p == nil {
		return nil, nil
	}
	if p.Provenance == nil {
		// pkg/config refuses it at load; a source built otherwise must
		// not publish what it was told to verify.
		return nil, errors.New("verify: a chart repository's charts are verified by their Helm provenance (verify.provenance); keys and keyless check signatures of OCI manifests")
	}
	v, err := newVerifier(*p)
	if err != nil {
		return nil, err
	}
	pv, ok := v.(ProvenanceVerifier)
	if !ok {
		return nil, errors.New("verify: the verifier linked into this binary does not check Helm provenance; refusing to fetch unverified")
	}
	return pv, nil
}

// provenanceETag is the validator to send for the index, from the one a
// fetch stored (withPolicy): only one stored under the same policy (or
// none, both without), so that a keyring changed, added or removed reads
// the index and verifies (or drops the provenance of) every chart.
func provenanceETag(stored string, v ProvenanceVerifier) string {
	etag, by, _ := strings.Cut(stored, " verify ")
	want := ""
	if v != nil {
		want = v.Digest()
	}
	if by != want {
		return ""
	}
	return etag
}

// withPolicy is the validator a fetch stores: the index's, with the
// policy's digest. An HTTP entity tag holds no space, so the first
// " verify " is the separator.
func withPolicy(etag string, v ProvenanceVerifier) string {
	if etag == "" || v == nil {
		return etag
	}
	return etag + " verify " + v.Digest()
}

// provenanceURL is where a chart archive's provenance file is: its URL
// with ".prov" added to the path (the query, which may authorize the
// request, kept), as helm looks it up.
func provenanceURL(archive *url.URL) *url.URL {
	u := *archive
	u.Path += ".prov"
	if u.RawPath != "" {
		u.RawPath += ".prov"
	}
	return &u
}

// verifyChart verifies a chart version read from the archive whose bytes
// have sum, unless this source verified that digest under the same
// policy before. Verified, the spec carries its provenance; refused, the
// entry is the chart's error with no Upstream. fatal is a .prov that
// could not be fetched (a 5xx, a timeout, a refused connection): the
// fetch's failure.
func (h *Helm) verifyChart(ctx context.Context, v ProvenanceVerifier, o chartOutcome, e *Entry, sum, authz string) (fatal error) {
	what := fmt.Sprintf("chart %s version %s", o.name, o.v.version)
	by := v.Digest()
	res, ok := h.verified.get(sum, by)
	if !ok {
		u := provenanceURL(o.url)
		where := RedactURL(u)
		refuse := func(err error) error {
			if rej := policy.Rejected(err); rej != nil {
				rej.Prov = where
			}
			e.Spec, e.Upstream = nil, ""
			e.Err = fmt.Errorf("%s: %w", what, err)
			return nil
		}
		body, status, over, err := h.getProvenance(ctx, u, authz)
		switch {
		case err != nil:
			return fmt.Errorf("%s: provenance %s: %w", what, where, err)
		case status == http.StatusNotFound || status == http.StatusGone:
			return refuse(&policy.Rejection{Digest: sum, Reason: policy.Missing, Detail: fmt.Sprintf("%d %s", status, http.StatusText(status))})
		case over:
			return refuse(&policy.Rejection{Digest: sum, Reason: policy.Invalid,
				Detail: fmt.Sprintf("more than the %d bytes a provenance file may have", maxProvBytes)})
		}
		res, err = v.VerifyProvenance(body, path.Base(o.url.Path), sum)
		switch {
		case policy.Rejected(err) != nil:
			return refuse(err)
		case err != nil:
			return fmt.Errorf("%s: provenance %s: %w", what, where, err)
		}
		// Without the index's digest nothing names the archive across
		// fetches (sum is then of this download alone): not remembered.
		if o.key != "" {
			h.verified.put(sum, by, res)
		}
	}
	e.Spec.Provenance = &spec.Provenance{Digest: res.Digest, Identity: res.Signer.Identity, Issuer: res.Signer.Issuer, Key: res.Signer.Key}
	return nil
}

// getProvenance GETs a provenance file, with the repository's
// credentials only on the repository's own scheme, host and port (as
// the archive). A 404 or 410 is its status and no error (the chart is
// unsigned), as is a body over maxProvBytes (over); any other answer but
// a 2xx is an error carrying its status (StatusError).
func (h *Helm) getProvenance(ctx context.Context, u *url.URL, authz string) (body []byte, status int, over bool, err error) {
	resp, err := h.get(ctx, u, authz, "application/pgp-signature, text/plain;q=0.9, */*;q=0.1")
	if err != nil {
		return nil, 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		return nil, resp.StatusCode, false, nil
	}
	body, over, err = readResponse(resp, maxProvBytes)
	return body, resp.StatusCode, over, err
}

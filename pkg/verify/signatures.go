package verify

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"

	"github.com/specsync/specsync/pkg/failure"
)

// What the registries hold, as cosign writes it.
const (
	// BundleArtifactType is a sigstore bundle stored as a referrer of
	// the manifest it signs (cosign v3; OCI 1.1): the referrer's
	// artifactType and its layer's media type.
	BundleArtifactType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// SimpleSigningMediaType is a layer of a legacy cosign signature
	// manifest (tag sha256-<hex>.sig): a simple-signing payload naming
	// the digest signed, its signature in the layer's annotations.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"

	AnnotationSignature   = "dev.cosignproject.cosign/signature"
	AnnotationCertificate = "dev.sigstore.cosign/certificate"
	AnnotationChain       = "dev.sigstore.cosign/chain"
	AnnotationBundle      = "dev.sigstore.cosign/bundle"
	AnnotationTimestamp   = "dev.sigstore.cosign/rfc3161timestamp"

	// SignPredicateType is the predicate of the in-toto statement a
	// cosign v3 image signature is (DSSE): other predicates (SBOMs,
	// provenance) are attestations, not signatures, and are passed over.
	SignPredicateType = "https://sigstore.dev/cosign/sign/v1"

	annotationPredicateType = "dev.sigstore.bundle.predicateType"
	inTotoPayloadType       = "application/vnd.in-toto+json"
	bundleMediaTypePrefix   = "application/vnd.dev.sigstore.bundle"
	legacyBundleMediaType   = "application/vnd.dev.sigstore.bundle+json;version=0.1"
)

// maxSignatureBytes bounds a signature's blob (a bundle, a payload): a
// few KiB in practice; more is not a signature.
const maxSignatureBytes = 1 << 20

// Where a signature was found.
const (
	ViaReferrers = "referrers"
	ViaTag       = "tag"
)

// signature is one signature found for a manifest digest: a sigstore
// bundle (or a legacy signature turned into one), what it claims to sign,
// or why it could not be read.
type signature struct {
	via, where string
	entity     *bundle.Bundle
	// payload is a legacy signature's simple-signing payload: the bytes
	// signed. Nil for a bundle, which signs the digest (message
	// signature) or a statement naming it (DSSE).
	payload []byte
	// claims are the manifest digests ("sha256:<hex>") the signature
	// says it signs, read before any check: an unverified claim only
	// picks the reason a signature is refused.
	claims []string
	// err says why the signature could not be read (a blob that is not
	// a bundle, a referrer the registry lists but does not have).
	err error
}

// lookupFailure is a failed signature lookup: the registry's fault, not
// the entry's, so the fetch fails whole (failure.Unavailable).
func lookupFailure(what string, err error) error {
	return failure.Wrap(failure.Unavailable, fmt.Errorf("looking up signatures: %s: %w", what, err))
}

func notFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}

// referrerSignatures are the sigstore bundles stored as referrers of the
// digest: the OCI 1.1 referrers API where the registry serves it, else
// the referrers tag schema (sha256-<hex>, an index) that clients such as
// cosign and go-containerregistry keep on registries without it.
func referrerSignatures(repo name.Repository, d v1.Hash, opts []remote.Option) ([]signature, error) {
	idx, err := remote.Referrers(repo.Digest(d.String()), opts...)
	if err != nil {
		return nil, lookupFailure("referrers of "+d.String(), err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, lookupFailure("referrers of "+d.String(), err)
	}
	var out []signature
	for _, desc := range im.Manifests {
		if !strings.HasPrefix(desc.ArtifactType, bundleMediaTypePrefix) {
			continue // an SBOM or another artifact
		}
		if p, ok := desc.Annotations[annotationPredicateType]; ok && p != SignPredicateType {
			continue // an attestation, said so before it is read
		}
		where := "referrer " + desc.Digest.String()
		sig := signature{via: ViaReferrers, where: where}
		m, err := readManifest(repo.Digest(desc.Digest.String()), opts)
		switch {
		case notFound(err):
			sig.err = errors.New("listed as a referrer but not in the registry")
			out = append(out, sig)
			continue
		case err != nil:
			return nil, lookupFailure(where, err)
		}
		found := false
		for _, l := range m.Layers {
			if !strings.HasPrefix(string(l.MediaType), bundleMediaTypePrefix) {
				continue
			}
			found = true
			one := signature{via: ViaReferrers, where: where}
			data, err := readBlob(repo, l.Digest, opts)
			switch {
			case notFound(err):
				one.err = errors.New("its bundle blob is not in the registry")
			case err != nil:
				return nil, lookupFailure(where, err)
			default:
				var attestation bool
				one.entity, one.claims, attestation, one.err = parseBundle(data)
				if attestation {
					continue
				}
			}
			out = append(out, one)
		}
		if !found {
			sig.err = errors.New("holds no sigstore bundle layer")
			out = append(out, sig)
		}
	}
	return out, nil
}

// tagSignatures are legacy cosign signatures: the manifest tagged
// sha256-<hex>.sig, one simple-signing layer per signature.
func tagSignatures(repo name.Repository, d v1.Hash, opts []remote.Option) ([]signature, error) {
	tag := repo.Tag(d.Algorithm + "-" + d.Hex + ".sig")
	m, err := readManifest(tag, opts)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, lookupFailure(tag.TagStr(), err)
	}
	var out []signature
	for i, l := range m.Layers {
		if l.MediaType != SimpleSigningMediaType {
			continue
		}
		sig := signature{via: ViaTag, where: fmt.Sprintf("%s layer %d", tag.TagStr(), i)}
		data, err := readBlob(repo, l.Digest, opts)
		switch {
		case notFound(err):
			sig.err = errors.New("its payload blob is not in the registry")
		case err != nil:
			return nil, lookupFailure(sig.where, err)
		default:
			sig.payload = data
			sig.entity, sig.claims, sig.err = legacyBundle(data, l.Annotations)
		}
		out = append(out, sig)
	}
	return out, nil
}

func readManifest(ref name.Reference, opts []remote.Option) (*v1.Manifest, error) {
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		// The registry answered, with something that is not a manifest.
		return nil, fmt.Errorf("not a manifest: %w", err)
	}
	return m, nil
}

func readBlob(repo name.Repository, d v1.Hash, opts []remote.Option) ([]byte, error) {
	l, err := remote.Layer(repo.Digest(d.String()), opts...)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxSignatureBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSignatureBytes {
		return nil, fmt.Errorf("blob %s is over %d bytes", d, maxSignatureBytes)
	}
	return b, nil
}

// parseBundle reads a sigstore bundle and what it claims to sign: a
// message signature's digest, or the subjects of the in-toto statement a
// DSSE envelope carries (cosign v3 signs a statement naming the image,
// of predicate SignPredicateType). A statement of another predicate is an
// attestation: reported as such, not as a signature.
func parseBundle(data []byte) (b *bundle.Bundle, claims []string, attestation bool, err error) {
	b = &bundle.Bundle{}
	if err := b.UnmarshalJSON(data); err != nil {
		return nil, nil, false, fmt.Errorf("not a sigstore bundle: %w", err)
	}
	if ms := b.GetMessageSignature(); ms != nil {
		if md := ms.GetMessageDigest(); md != nil && md.GetAlgorithm() == protocommon.HashAlgorithm_SHA2_256 {
			claims = append(claims, "sha256:"+hex.EncodeToString(md.GetDigest()))
		}
	}
	if env := b.GetDsseEnvelope(); env != nil {
		var st struct {
			PredicateType string `json:"predicateType"`
			Subject       []struct {
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
		}
		if env.GetPayloadType() != inTotoPayloadType {
			return nil, nil, false, fmt.Errorf("its DSSE payload is of type %q, not an in-toto statement", env.GetPayloadType())
		}
		if err := json.Unmarshal(env.GetPayload(), &st); err != nil {
			return nil, nil, false, fmt.Errorf("its DSSE payload is not an in-toto statement: %w", err)
		}
		if st.PredicateType != SignPredicateType {
			return nil, nil, true, nil
		}
		for _, s := range st.Subject {
			if h := s.Digest["sha256"]; h != "" {
				claims = append(claims, "sha256:"+h)
			}
		}
	}
	return b, claims, false, nil
}

// simpleSigning is the part of cosign's simple-signing payload that
// names what is signed.
type simpleSigning struct {
	Critical struct {
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// rekorBundle is cosign's dev.sigstore.cosign/bundle annotation: the
// transparency log's signed promise of an entry (no inclusion proof).
type rekorBundle struct {
	SignedEntryTimestamp []byte
	Payload              struct {
		Body           string `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogIndex       int64  `json:"logIndex"`
		LogID          string `json:"logID"`
	}
}

// legacyBundle turns a legacy cosign signature (a simple-signing payload
// and its layer's annotations) into the sigstore bundle it amounts to,
// for sigstore-go to verify: a message signature over the payload, with
// the certificate, the log entry's promise and the timestamp when the
// annotations carry them. Bundle version 0.1 is the one whose log
// entries may carry a promise without an inclusion proof, as cosign's
// annotation does.
func legacyBundle(payload []byte, ann map[string]string) (*bundle.Bundle, []string, error) {
	var ss simpleSigning
	if err := json.Unmarshal(payload, &ss); err != nil {
		return nil, nil, fmt.Errorf("its payload is not cosign's simple signing JSON: %w", err)
	}
	var claims []string
	if d := ss.Critical.Image.DockerManifestDigest; d != "" {
		claims = append(claims, d)
	}
	sigB64, ok := ann[AnnotationSignature]
	if !ok {
		return nil, claims, fmt.Errorf("no %s annotation", AnnotationSignature)
	}
	sig, err := base64.StdEncoding.DecodeString(sigB64)
	if err != nil {
		return nil, claims, fmt.Errorf("its %s annotation is not base64", AnnotationSignature)
	}
	// The digest is only the bundle's shape; sigstore-go verifies the
	// signature over the payload itself (WithArtifact).
	sum := sha256Sum(payload)
	pb := &protobundle.Bundle{
		MediaType: legacyBundleMediaType,
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: sum},
			Signature:     sig,
		}},
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{}},
		},
	}
	if certPEM := ann[AnnotationCertificate]; certPEM != "" {
		blk, _ := pem.Decode([]byte(certPEM))
		if blk == nil || blk.Type != "CERTIFICATE" {
			return nil, claims, fmt.Errorf("its %s annotation is not a PEM certificate", AnnotationCertificate)
		}
		pb.VerificationMaterial.Content = &protobundle.VerificationMaterial_X509CertificateChain{
			X509CertificateChain: &protocommon.X509CertificateChain{Certificates: []*protocommon.X509Certificate{{RawBytes: blk.Bytes}}},
		}
		// The log entry and the timestamp matter to a certificate only:
		// they prove it was valid when the signature was made. A key
		// signature stands on the key alone.
		if rb := ann[AnnotationBundle]; rb != "" {
			tle, err := legacyLogEntry(rb)
			if err != nil {
				return nil, claims, err
			}
			pb.VerificationMaterial.TlogEntries = append(pb.VerificationMaterial.TlogEntries, tle)
		}
		if ts := ann[AnnotationTimestamp]; ts != "" {
			var t struct{ SignedRFC3161Timestamp []byte }
			if err := json.Unmarshal([]byte(ts), &t); err != nil {
				return nil, claims, fmt.Errorf("its %s annotation does not parse: %w", AnnotationTimestamp, err)
			}
			pb.VerificationMaterial.TimestampVerificationData = &protobundle.TimestampVerificationData{
				Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: t.SignedRFC3161Timestamp}},
			}
		}
	}
	b, err := bundle.NewBundle(pb)
	if err != nil {
		return nil, claims, fmt.Errorf("does not make a sigstore bundle: %w", err)
	}
	return b, claims, nil
}

// legacyLogEntry is cosign's log entry annotation as the bundle's
// transparency log entry: its body, place and the log's signed promise.
func legacyLogEntry(annotation string) (*protorekor.TransparencyLogEntry, error) {
	var rb rekorBundle
	if err := json.Unmarshal([]byte(annotation), &rb); err != nil {
		return nil, fmt.Errorf("its %s annotation does not parse: %w", AnnotationBundle, err)
	}
	body, err := base64.StdEncoding.DecodeString(rb.Payload.Body)
	if err != nil {
		return nil, fmt.Errorf("its %s annotation's body is not base64", AnnotationBundle)
	}
	logID, err := hex.DecodeString(rb.Payload.LogID)
	if err != nil {
		return nil, fmt.Errorf("its %s annotation's logID is not hex", AnnotationBundle)
	}
	var kv struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(body, &kv); err != nil {
		return nil, fmt.Errorf("its %s annotation's body is not a log entry: %w", AnnotationBundle, err)
	}
	return &protorekor.TransparencyLogEntry{
		LogIndex:          rb.Payload.LogIndex,
		LogId:             &protocommon.LogId{KeyId: logID},
		KindVersion:       &protorekor.KindVersion{Kind: kv.Kind, Version: kv.APIVersion},
		IntegratedTime:    rb.Payload.IntegratedTime,
		InclusionPromise:  &protorekor.InclusionPromise{SignedEntryTimestamp: rb.SignedEntryTimestamp},
		CanonicalizedBody: body,
	}, nil
}

// discoverCtx are the source's options with the lookup's context: a
// caller's deadline bounds every request of the lookup.
func discoverCtx(ctx context.Context, opts []remote.Option) []remote.Option {
	return append(append([]remote.Option(nil), opts...), remote.WithContext(ctx))
}

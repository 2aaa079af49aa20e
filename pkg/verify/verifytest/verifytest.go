// Package verifytest signs images in a test's registry as cosign does,
// with a key made for the test and sigstore-go's own signing code, so
// that the sources and the reconcile run are tested against real
// signatures. Tests only.
package verifytest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/specsync/specsync/pkg/verify"
)

// Key is a cosign key pair made for the test (ECDSA P-256).
type Key struct {
	kp  *sign.EphemeralKeypair
	PEM string
}

// NewKey makes a key pair.
func NewKey(t testing.TB) *Key {
	t.Helper()
	kp, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := kp.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	return &Key{kp: kp, PEM: p}
}

// Fingerprint is the key as a Signer names it.
func (k *Key) Fingerprint(t testing.TB) string {
	t.Helper()
	fp, err := verify.Fingerprint([]byte(k.PEM))
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// Policy is a verify block accepting the keys, each in a file (as a
// Secret Manager volume gives it).
func Policy(t testing.TB, keys ...*Key) *verify.Policy {
	t.Helper()
	p := &verify.Policy{}
	dir := t.TempDir()
	for i, k := range keys {
		f := filepath.Join(dir, "cosign-"+string(rune('a'+i))+".pub")
		if err := os.WriteFile(f, []byte(k.PEM), 0o600); err != nil {
			t.Fatal(err)
		}
		p.Keys = append(p.Keys, verify.Key{PEMFile: f})
	}
	return p
}

// Sign signs the manifest subject in repo as `cosign sign --key` (v3)
// does: a sigstore bundle of an in-toto statement naming the digest,
// stored as a referrer of it (go-containerregistry keeps the referrers
// tag schema's index where the registry lacks the API).
func (k *Key) Sign(t testing.TB, repo name.Repository, subject v1.Hash, opts ...remote.Option) {
	t.Helper()
	k.SignAs(t, repo, subject, subject, opts...)
}

// SignAs stores, as a signature of subject, a signature of signed: a
// signature of another manifest when they differ.
func (k *Key) SignAs(t testing.TB, repo name.Repository, subject, signed v1.Hash, opts ...remote.Option) {
	t.Helper()
	pb, err := sign.Bundle(&sign.DSSEData{Data: statement(signed), PayloadType: "application/vnd.in-toto+json"}, k.kp, sign.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	PushBundle(t, repo, subject, data, opts...)
}

// SignTampered stores a signature of subject whose signed statement was
// altered after signing.
func (k *Key) SignTampered(t testing.TB, repo name.Repository, subject v1.Hash, opts ...remote.Option) {
	t.Helper()
	pb, err := sign.Bundle(&sign.DSSEData{Data: statement(subject), PayloadType: "application/vnd.in-toto+json"}, k.kp, sign.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := pb.GetDsseEnvelope()
	env.Payload = bytes.Replace(env.Payload, []byte(`"predicate":{}`), []byte(`"predicate":{"x":1}`), 1)
	data, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	PushBundle(t, repo, subject, data, opts...)
}

// SignTag signs subject as cosign v2 did: a simple-signing payload in
// the manifest tagged sha256-<hex>.sig.
func (k *Key) SignTag(t testing.TB, repo name.Repository, subject v1.Hash, opts ...remote.Option) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{
		"critical": map[string]any{
			"identity": map[string]string{"docker-reference": repo.String()},
			"image":    map[string]string{"docker-manifest-digest": subject.String()},
			"type":     "cosign container image signature",
		},
		"optional": nil,
	})
	sig, _, err := k.kp.SignData(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	cfg := pushBlob(t, repo, []byte("{}"), "application/vnd.oci.image.config.v1+json", opts)
	layer := pushBlob(t, repo, payload, verify.SimpleSigningMediaType, opts)
	layer.Annotations = map[string]string{verify.AnnotationSignature: base64.StdEncoding.EncodeToString(sig)}
	raw, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": types.OCIManifestSchema1, "config": cfg, "layers": []v1.Descriptor{layer},
	})
	if err := remote.Put(repo.Tag(subject.Algorithm+"-"+subject.Hex+".sig"), rawManifest{raw, types.OCIManifestSchema1}, opts...); err != nil {
		t.Fatal(err)
	}
}

// statement is what cosign v3 signs for an image: an in-toto statement
// of predicate SignPredicateType naming the manifest digest.
func statement(d v1.Hash) []byte {
	b, _ := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []map[string]any{{"name": "image", "digest": map[string]string{d.Algorithm: d.Hex}}},
		"predicateType": verify.SignPredicateType,
		"predicate":     map[string]any{},
	})
	return b
}

type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

func pushBlob(t testing.TB, repo name.Repository, data []byte, mt types.MediaType, opts []remote.Option) v1.Descriptor {
	t.Helper()
	l := static.NewLayer(data, mt)
	if err := remote.WriteLayer(repo, l, opts...); err != nil {
		t.Fatal(err)
	}
	d, _ := l.Digest()
	return v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(data))}
}

// PushBundle stores a bundle's JSON as cosign v3 does: a manifest of
// artifactType the bundle's media type, its one layer the bundle, its
// subject the signed manifest.
func PushBundle(t testing.TB, repo name.Repository, subject v1.Hash, data []byte, opts ...remote.Option) {
	t.Helper()
	cfg := pushBlob(t, repo, []byte("{}"), "application/vnd.oci.empty.v1+json", opts)
	layer := pushBlob(t, repo, data, verify.BundleArtifactType, opts)
	raw, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     types.OCIManifestSchema1,
		"artifactType":  verify.BundleArtifactType,
		"config":        cfg,
		"layers":        []v1.Descriptor{layer},
		"subject":       v1.Descriptor{MediaType: types.DockerManifestSchema2, Digest: subject, Size: 1},
		"annotations":   map[string]string{"dev.sigstore.bundle.content": "dsse-envelope", "dev.sigstore.bundle.predicateType": verify.SignPredicateType},
	})
	h, _, _ := v1.SHA256(bytes.NewReader(raw))
	if err := remote.Put(repo.Digest(h.String()), rawManifest{raw, types.OCIManifestSchema1}, opts...); err != nil {
		t.Fatal(err)
	}
}

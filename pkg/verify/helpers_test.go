package verify_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/specsync/specsync/pkg/verify"
)

// registryServer is the reference registry (distribution, in memory)
// behind a request log and a fault hook. Distribution serves no OCI 1.1
// referrers API: with referrers set, referrersAPI serves it in front, as
// the distribution spec documents it.
type registryServer struct {
	host string

	mu       sync.Mutex
	requests []string
	fault    func(w http.ResponseWriter, r *http.Request) bool
}

func newRegistry(t testing.TB, referrers bool) *registryServer {
	t.Helper()
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	var h http.Handler = handlers.NewApp(context.Background(), cfg)
	if referrers {
		h = referrersAPI(h)
	}
	s := &registryServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.Path)
		fault := s.fault
		s.mu.Unlock()
		if fault != nil && fault(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.host = strings.TrimPrefix(srv.URL, "http://")
	return s
}

func (s *registryServer) setFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

func (s *registryServer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

func (s *registryServer) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

func (s *registryServer) repo(t testing.TB, path string) name.Repository {
	t.Helper()
	r, err := name.NewRepository(s.host+"/"+path, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// referrersAPI serves GET /v2/NAME/referrers/DIGEST (OCI distribution
// spec 1.1) in front of a registry without it: it remembers each
// manifest pushed with a subject, and answers with an image index of
// them, each with its artifactType (the manifest's, else its config's
// media type) and annotations.
func referrersAPI(next http.Handler) http.Handler {
	var mu sync.Mutex
	refs := map[string][]v1.Descriptor{} // "repo@subject" -> referrers
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, "/v2/")
		if i := strings.LastIndex(p, "/referrers/"); i >= 0 && r.Method == http.MethodGet {
			mu.Lock()
			list := append([]v1.Descriptor{}, refs[p[:i]+"@"+p[i+len("/referrers/"):]]...)
			mu.Unlock()
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
			_ = json.NewEncoder(w).Encode(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: list})
			return
		}
		i := strings.LastIndex(p, "/manifests/")
		if i < 0 || r.Method != http.MethodPut {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			MediaType    types.MediaType   `json:"mediaType"`
			ArtifactType string            `json:"artifactType"`
			Config       v1.Descriptor     `json:"config"`
			Subject      *v1.Descriptor    `json:"subject"`
			Annotations  map[string]string `json:"annotations"`
		}
		if json.Unmarshal(body, &m) == nil && m.Subject != nil {
			h, size, _ := v1.SHA256(bytes.NewReader(body))
			at := m.ArtifactType
			if at == "" {
				at = string(m.Config.MediaType)
			}
			mu.Lock()
			key := p[:i] + "@" + m.Subject.Digest.String()
			refs[key] = append(refs[key], v1.Descriptor{MediaType: m.MediaType, Digest: h, Size: size, ArtifactType: at, Annotations: m.Annotations})
			mu.Unlock()
			w.Header().Set("OCI-Subject", m.Subject.Digest.String())
		}
		next.ServeHTTP(w, r)
	})
}

// pushImage pushes a small random image and returns its digest.
func pushImage(t testing.TB, repo name.Repository, tag string) v1.Hash {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(repo.Tag(tag), img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
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

// rawManifest is a manifest pushed as written.
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

const emptyJSONMediaType = "application/vnd.oci.empty.v1+json"

// pushBlob uploads a blob and returns its descriptor.
func pushBlob(t testing.TB, repo name.Repository, data []byte, mt types.MediaType) v1.Descriptor {
	t.Helper()
	l := static.NewLayer(data, mt)
	if err := remote.WriteLayer(repo, l); err != nil {
		t.Fatal(err)
	}
	d, _ := l.Digest()
	return v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(data))}
}

// pushBundle stores a sigstore bundle as cosign v3 does (cosign's
// BUNDLE_SPEC): a manifest of artifactType the bundle's media type, its
// one layer the bundle, its subject the signed manifest. go-containerregistry
// keeps the referrers tag schema's index on a registry without the API.
func pushBundle(t testing.TB, repo name.Repository, subject v1.Hash, pb *protobundle.Bundle) {
	t.Helper()
	data, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	pushBundleJSON(t, repo, subject, data)
}

func pushBundleJSON(t testing.TB, repo name.Repository, subject v1.Hash, data []byte) {
	t.Helper()
	cfg := pushBlob(t, repo, []byte("{}"), emptyJSONMediaType)
	layer := pushBlob(t, repo, data, verify.BundleArtifactType)
	m := map[string]any{
		"schemaVersion": 2,
		"mediaType":     types.OCIManifestSchema1,
		"artifactType":  verify.BundleArtifactType,
		"config":        cfg,
		"layers":        []v1.Descriptor{layer},
		"subject":       v1.Descriptor{MediaType: types.DockerManifestSchema2, Digest: subject, Size: 1},
		"annotations":   map[string]string{"dev.sigstore.bundle.content": "dsse-envelope", "dev.sigstore.bundle.predicateType": verify.SignPredicateType},
	}
	raw, _ := json.Marshal(m)
	h, _, _ := v1.SHA256(bytes.NewReader(raw))
	if err := remote.Put(repo.Digest(h.String()), rawManifest{raw, types.OCIManifestSchema1}); err != nil {
		t.Fatal(err)
	}
}

// simpleSigning is cosign's legacy payload for an image digest.
func simpleSigning(repo name.Repository, d v1.Hash) []byte {
	b, _ := json.Marshal(map[string]any{
		"critical": map[string]any{
			"identity": map[string]string{"docker-reference": repo.String()},
			"image":    map[string]string{"docker-manifest-digest": d.String()},
			"type":     "cosign container image signature",
		},
		"optional": nil,
	})
	return b
}

// pushLegacy stores a legacy cosign signature: the manifest tagged
// sha256-<hex>.sig, a simple-signing layer with the signature (and
// certificate, log entry) in its annotations.
func pushLegacy(t testing.TB, repo name.Repository, subject v1.Hash, payload []byte, ann map[string]string) {
	t.Helper()
	cfg := pushBlob(t, repo, []byte("{}"), "application/vnd.oci.image.config.v1+json")
	layer := pushBlob(t, repo, payload, verify.SimpleSigningMediaType)
	layer.Annotations = ann
	raw, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     types.OCIManifestSchema1,
		"config":        cfg,
		"layers":        []v1.Descriptor{layer},
	})
	if err := remote.Put(repo.Tag(subject.Algorithm+"-"+subject.Hex+".sig"), rawManifest{raw, types.OCIManifestSchema1}); err != nil {
		t.Fatal(err)
	}
}

// signer is a key pair made for the test (ECDSA P-256, sigstore-go's
// signing code) and its public key's PEM.
type signer struct {
	kp  *sign.EphemeralKeypair
	pem string
}

func newSigner(t testing.TB) signer {
	t.Helper()
	kp, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := kp.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	return signer{kp, p}
}

// bundle signs the statement of d with the key, as `cosign sign --key`
// with the new bundle format does (no transparency log).
func (s signer) bundle(t testing.TB, d v1.Hash) *protobundle.Bundle {
	t.Helper()
	pb, err := sign.Bundle(&sign.DSSEData{Data: statement(d), PayloadType: "application/vnd.in-toto+json"}, s.kp, sign.BundleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pb
}

// legacy signs a simple-signing payload with the key: the annotations
// of cosign's .sig layer.
func (s signer) legacy(t testing.TB, payload []byte) map[string]string {
	t.Helper()
	sig, _, err := s.kp.SignData(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{verify.AnnotationSignature: base64.StdEncoding.EncodeToString(sig)}
}

// virtualSigstore is sigstore-go's test Fulcio, Rekor and timestamp
// authority, with its trusted root written to a file as an operator
// would give it.
type virtualSigstore struct {
	vs       *ca.VirtualSigstore
	rootFile string
}

func newVirtualSigstore(t testing.TB) virtualSigstore {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	// The virtual Rekor names its log by the hex of its key's ID; a
	// trusted_root.json carries the ID's bytes.
	logs := map[string]*root.TransparencyLog{}
	for id, l := range vs.RekorLogs() {
		c := *l
		if c.ID, err = hex.DecodeString(id); err != nil {
			t.Fatal(err)
		}
		logs[id] = &c
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), nil, vs.TimestampingAuthorities(), logs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return virtualSigstore{vs, file}
}

// withKindVersion is a log entry as a bundle carries it: the kind and
// version of its body (tlog.Entry's protobuf leaves them out).
func withKindVersion(t testing.TB, e *tlog.Entry) *protorekor.TransparencyLogEntry {
	t.Helper()
	tle := e.TransparencyLogEntry()
	var kv struct{ Kind, APIVersion string }
	if err := json.Unmarshal(tle.CanonicalizedBody, &kv); err != nil {
		t.Fatal(err)
	}
	tle.KindVersion = &protorekor.KindVersion{Kind: kv.Kind, Version: kv.APIVersion}
	return tle
}

// bundle signs d's statement keyless as identity from issuer: a
// certificate from the virtual Fulcio, a Rekor entry with its inclusion
// proof and a timestamp, as a cosign v3 keyless bundle has them.
func (v virtualSigstore) bundle(t testing.TB, identity, issuer string, d v1.Hash) *protobundle.Bundle {
	t.Helper()
	ent, err := v.vs.AttestAtTime(identity, issuer, statement(d), time.Now().Add(5*time.Minute), true)
	if err != nil {
		t.Fatal(err)
	}
	vc, _ := ent.VerificationContent()
	sc, _ := ent.SignatureContent()
	env := sc.EnvelopeContent().RawEnvelope()
	payload, _ := base64.StdEncoding.DecodeString(env.Payload)
	sig, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	tss, _ := ent.Timestamps()
	entries, _ := ent.TlogEntries()
	pb := &protobundle.Bundle{
		MediaType: verify.BundleArtifactType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:     &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw}},
			TlogEntries: []*protorekor.TransparencyLogEntry{withKindVersion(t, entries[0])},
			TimestampVerificationData: &protobundle.TimestampVerificationData{
				Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: tss[0]}},
			},
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload: payload, PayloadType: env.PayloadType,
			Signatures: []*protodsse.Signature{{Sig: sig, Keyid: env.Signatures[0].KeyID}},
		}},
	}
	return pb
}

// legacy signs a simple-signing payload keyless: the annotations of
// cosign's .sig layer (signature, certificate, and the log entry's
// promise in dev.sigstore.cosign/bundle).
func (v virtualSigstore) legacy(t testing.TB, identity, issuer string, payload []byte) map[string]string {
	t.Helper()
	ent, err := v.vs.SignAtTime(identity, issuer, payload, time.Now().Add(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	vc, _ := ent.VerificationContent()
	sc, _ := ent.SignatureContent()
	entries, _ := ent.TlogEntries()
	tle := entries[0].TransparencyLogEntry()
	rp := tlog.RekorPayload{
		Body:           base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
		IntegratedTime: tle.IntegratedTime,
		LogIndex:       tle.LogIndex,
		LogID:          hex.EncodeToString(tle.LogId.KeyId),
	}
	set, err := v.vs.RekorSignPayload(rp)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := json.Marshal(map[string]any{"SignedEntryTimestamp": set, "Payload": rp})
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: vc.Certificate().Raw}))
	return map[string]string{
		verify.AnnotationSignature:   base64.StdEncoding.EncodeToString(sc.MessageSignatureContent().Signature()),
		verify.AnnotationCertificate: certPEM,
		verify.AnnotationBundle:      string(rb),
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

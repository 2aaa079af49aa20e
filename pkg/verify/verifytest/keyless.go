package verifytest

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/specsync/specsync/pkg/verify"
)

// Sigstore is sigstore-go's virtual Fulcio, Rekor and timestamp
// authority, its trusted root written to a file as an operator gives it.
type Sigstore struct {
	vs       *ca.VirtualSigstore
	RootFile string
}

// NewSigstore starts a virtual Sigstore.
func NewSigstore(t testing.TB) *Sigstore {
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
	return &Sigstore{vs, file}
}

// Policy is a verify block accepting keyless signatures of identity from
// issuer.
func (s *Sigstore) Policy(identity, issuer string) *verify.Policy {
	return &verify.Policy{Keyless: &verify.Keyless{TrustedRootFile: s.RootFile, Identity: identity, Issuer: issuer}}
}

// Sign signs subject keyless as identity from issuer, as cosign v3 does:
// a certificate from the virtual Fulcio, a Rekor entry with its inclusion
// proof and a timestamp, in a bundle referring to subject.
func (s *Sigstore) Sign(t testing.TB, repo name.Repository, subject v1.Hash, identity, issuer string, opts ...remote.Option) {
	t.Helper()
	ent, err := s.vs.AttestAtTime(identity, issuer, statement(subject), time.Now().Add(5*time.Minute), true)
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
	tle := entries[0].TransparencyLogEntry()
	var kv struct{ Kind, APIVersion string }
	if err := json.Unmarshal(tle.CanonicalizedBody, &kv); err != nil {
		t.Fatal(err)
	}
	tle.KindVersion = &protorekor.KindVersion{Kind: kv.Kind, Version: kv.APIVersion}
	pb := &protobundle.Bundle{
		MediaType: verify.BundleArtifactType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content:     &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw}},
			TlogEntries: []*protorekor.TransparencyLogEntry{tle},
			TimestampVerificationData: &protobundle.TimestampVerificationData{
				Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: tss[0]}},
			},
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload: payload, PayloadType: env.PayloadType,
			Signatures: []*protodsse.Signature{{Sig: sig, Keyid: env.Signatures[0].KeyID}},
		}},
	}
	data, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	PushBundle(t, repo, subject, data, opts...)
}

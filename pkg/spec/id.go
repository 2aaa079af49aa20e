package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"golang.org/x/mod/semver"
)

// namespace is the UUIDv5 namespace of every id specsync derives. It is
// part of the public contract: changing it would change every derived id.
var namespace = uuid.MustParse("5b0a4f0e-3c55-4f6e-9d57-5e3c1f0a7a11")

// DeriveSpecID is the id of a spec without its own id: a UUIDv5 of the
// owning registry's name and the spec name. Renaming either yields a new
// id, which OSB treats as a new service; give the spec an explicit id to
// decouple it from both.
func DeriveSpecID(registry, name string) string {
	return uuid.NewSHA1(namespace, []byte("spec\x00"+registry+"\x00"+name)).String()
}

// DerivePlanID is the id of a plan without its own id: a UUIDv5 of the
// spec id and the plan name.
func DerivePlanID(specID, planName string) string {
	return uuid.NewSHA1(namespace, []byte("plan\x00"+specID+"\x00"+planName)).String()
}

// AssignIDs fills in the spec and plan ids that the spec does not set
// itself. It is idempotent.
func AssignIDs(s *Spec, registry string) {
	if s.ID == "" {
		s.ID = DeriveSpecID(registry, s.Name)
	}
	for i := range s.Plans {
		if s.Plans[i].ID == "" {
			s.Plans[i].ID = DerivePlanID(s.ID, s.Plans[i].Name)
		}
	}
}

// Digest is the canonical content digest of a spec: SHA-256 of its JSON
// encoding. encoding/json writes struct fields in declaration order and map
// keys sorted, so equal specs always have equal digests.
func Digest(s *Spec) string {
	b, err := json.Marshal(s)
	if err != nil {
		// A parsed spec holds only JSON values; this cannot happen.
		panic("spec: marshal for digest: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// MaintenanceVersion is the OSB maintenance_info version of a spec's plans
// at generation (the count of versions the store adopted, starting at 1):
// "<generation>.0.0", a semantic version that grows exactly when a new
// version is adopted. Generation 0 (a spec stored before generations were
// counted) has none: "".
func MaintenanceVersion(generation int64) string {
	if generation <= 0 {
		return ""
	}
	return strconv.FormatInt(generation, 10) + ".0.0"
}

// MaintenanceAt is the OSB maintenance_info version of the spec's plans
// when the store has adopted generation versions of it: the spec's own
// MaintenanceVersion when it has one (a Helm chart's version), else
// MaintenanceVersion(generation). Either way it changes only when a
// version is adopted, never for one held back: it is the served spec's.
func (s *Spec) MaintenanceAt(generation int64) string {
	if s.MaintenanceVersion != "" {
		return s.MaintenanceVersion
	}
	return MaintenanceVersion(generation)
}

// IsSemver reports whether v is a semantic version 2.0.0 written out in
// full, as OSB wants maintenance_info.version: MAJOR.MINOR.PATCH, an
// optional -prerelease and +build, no leading "v" and no shorthand
// ("1.2" is not one).
func IsSemver(v string) bool {
	if v == "" || v[0] == 'v' {
		return false
	}
	core, _, _ := strings.Cut("v"+v, "+")
	return semver.IsValid("v"+v) && semver.Canonical("v"+v) == core
}

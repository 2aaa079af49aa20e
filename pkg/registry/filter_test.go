package registry_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/spec"
)

func TestFilter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		allow, deny []string
		yes, no     []string
	}{
		{nil, nil, []string{"anything", "a/b"}, nil},
		{nil, []string{"tmp/.*"}, []string{"svc/a", "xtmp/a"}, []string{"tmp/a"}},
		{[]string{"svc/.*"}, nil, []string{"svc/a"}, []string{"other/a", "xsvc/a"}},
		// Deny wins over allow.
		{[]string{"svc/.*"}, []string{"svc/internal-.*"}, []string{"svc/a"}, []string{"svc/internal-x", "other"}},
		// Anchored: "svc" does not match "svc-extra".
		{[]string{"svc", "db|cache"}, nil, []string{"svc", "db", "cache"}, []string{"svc-extra", "dbx"}},
	} {
		f := mustFilter(t, tc.allow, tc.deny)
		for _, n := range tc.yes {
			if !f.Allows(n) {
				t.Errorf("allow %v deny %v: %s denied", tc.allow, tc.deny, n)
			}
		}
		for _, n := range tc.no {
			if f.Allows(n) {
				t.Errorf("allow %v deny %v: %s allowed", tc.allow, tc.deny, n)
			}
		}
	}
	var none *registry.Filter
	if !none.Allows("x") {
		t.Error("a nil filter denies")
	}
	if _, err := registry.NewFilter([]string{"ok", "(unclosed"}, nil); err == nil {
		t.Error("invalid expression accepted")
	}
}

func TestListingDigest(t *testing.T) {
	t.Parallel()
	mk := func(name, desc string) *spec.Spec {
		return &spec.Spec{Name: name, Description: desc, Plans: []spec.Plan{{Name: "p", Description: "p"}}}
	}
	a := []registry.Entry{
		{Name: "a", Ref: "r/a", Spec: mk("a", "one")},
		{Name: "b", Ref: "r/b", Spec: mk("b", "two")},
		{Name: "c", Ref: "r/c", Err: errors.New("bad label")},
	}
	same := []registry.Entry{a[2], {Name: "b", Ref: "r/b", Spec: mk("b", "two")}, a[0]}
	if registry.ListingDigest(a) != registry.ListingDigest(same) {
		t.Error("equal listings in another order have different digests")
	}
	base := registry.ListingDigest(a)
	for what, changed := range map[string][]registry.Entry{
		"spec":  {a[0], {Name: "b", Ref: "r/b", Spec: mk("b", "two!")}, a[2]},
		"ref":   {a[0], {Name: "b", Ref: "r/b2", Spec: mk("b", "two")}, a[2]},
		"error": {a[0], a[1], {Name: "c", Ref: "r/c", Err: errors.New("other")}},
		"gone":  {a[0], a[1]},
	} {
		if registry.ListingDigest(changed) == base {
			t.Errorf("a changed %s left the digest unchanged", what)
		}
	}
}

// A listing digest is the sum of its entries' digests, so a run that
// fetched a few entries again works out the digest of the listing with
// them replaced, exactly: the digest a full fetch of the new listing
// gives. A digest of another kind (an older version's, none) cannot be
// adjusted.
func TestListingDigestAdjusts(t *testing.T) {
	t.Parallel()
	mk := func(name, desc string) *spec.Spec {
		return &spec.Spec{Name: name, Description: desc, Plans: []spec.Plan{{Name: "p", Description: "p"}}}
	}
	var before []registry.Entry
	for i := range 50 {
		n := fmt.Sprintf("svc-%02d", i)
		before = append(before, registry.Entry{Name: n, Ref: "r/" + n, Spec: mk(n, "v1")})
	}
	// svc-03 changes, svc-07 breaks, svc-11 goes, svc-new comes.
	after := append([]registry.Entry(nil), before...)
	after[3] = registry.Entry{Name: "svc-03", Ref: "r/svc-03@2", Spec: mk("svc-03", "v2")}
	after[7] = registry.Entry{Name: "svc-07", Ref: "r/svc-07", Err: errors.New("bad label")}
	after = append(after[:11], after[12:]...)
	after = append(after, registry.Entry{Name: "svc-new", Ref: "r/svc-new", Spec: mk("svc-new", "v1")})

	remove := []string{registry.EntryDigest(before[3]), registry.EntryDigest(before[7]), registry.EntryDigest(before[11])}
	add := []string{registry.EntryDigest(after[3]), registry.EntryDigest(after[7]), registry.EntryDigest(after[len(after)-1])}
	got, ok := registry.AdjustDigest(registry.ListingDigest(before), remove, add)
	if want := registry.ListingDigest(after); !ok || got != want {
		t.Fatalf("adjusted digest %s (%v), want the new listing's %s", got, ok, want)
	}
	if same, ok := registry.AdjustDigest(registry.ListingDigest(before), remove[:1], remove[:1]); !ok || same != registry.ListingDigest(before) {
		t.Errorf("an entry replaced by itself changed the digest: %s", same)
	}
	if empty := registry.ListingDigest(nil); registry.ListingDigest(before[:1]) == empty {
		t.Error("one entry's listing has the empty listing's digest")
	}
	for _, bad := range []string{"", "sha256:" + strings.Repeat("0", 64), "sum128:zz"} {
		if d, ok := registry.AdjustDigest(bad, nil, add); ok || d != "" {
			t.Errorf("AdjustDigest(%q) = %q, %v; want no digest", bad, d, ok)
		}
	}
	if _, ok := registry.AdjustDigest(registry.ListingDigest(before), []string{"not base64!"}, nil); ok {
		t.Error("an entry digest that does not decode was taken")
	}
}

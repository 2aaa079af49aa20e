package registry_test

import (
	"errors"
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

package reconcile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/failure"
	"github.com/specsync/specsync/pkg/reconcile"
)

// A registries file loads into the registries a run reconciles, each with
// its deletion policy: the default where the entry sets none.
func TestLoadRegistriesTakesEachEntrysPolicy(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "registries.yaml")
	yaml := "registries:\n" +
		"- {name: plain, type: dir, dir: {embedded: true}}\n" +
		"- {name: careful, type: dir, dir: {embedded: true}, max_mark_share: 0.1}\n" +
		"- {name: bold, type: dir, dir: {embedded: true}, allow_mass_deletion: true}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	regs, err := reconcile.LoadRegistries(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(regs.Names(), ","); got != "plain,careful,bold" {
		t.Fatalf("registries %s", got)
	}
	for name, want := range map[string]reconcile.Policy{
		"plain":   {MaxMarkShare: reconcile.DefaultMaxMarkShare},
		"careful": {MaxMarkShare: 0.1},
		"bold":    {MaxMarkShare: reconcile.DefaultMaxMarkShare, AllowMassDeletion: true},
	} {
		r, ok := regs.Lookup(name)
		if !ok || r.Policy != want || r.Source == nil || r.Name != name {
			t.Errorf("%s: %+v, want policy %+v and a source", name, r, want)
		}
	}
	if _, ok := regs.Lookup("nope"); ok {
		t.Fatal("Lookup found a registry that is not there")
	}
}

// A registries file that does not load is invalid input whatever is
// wrong with it: retrying cannot fix it.
func TestLoadRegistriesClassifiesABadFileInvalid(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("registries:\n- name: Bad_Name\n  type: dir\n  dir: {embedded: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(dir, "absent.yaml")} {
		_, err := reconcile.LoadRegistries(path)
		if !failure.Is(err, failure.Invalid) || !strings.Contains(err.Error(), filepath.Base(path)) {
			t.Errorf("%s: %v, want an invalid-input error naming the file", path, err)
		}
	}
}

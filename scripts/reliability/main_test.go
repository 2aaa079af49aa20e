package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestTopLevel(t *testing.T) {
	for pat, want := range map[string]string{
		`^TestFaultMatrix(OCI|HTTP)/(connection_refused|DNS_failure)/`: `TestFaultMatrix(OCI|HTTP)`,
		`^TestScenarioCatalogSecondPageFails$`:                         `TestScenarioCatalogSecondPageFails$`,
		`^TestCheckerDetectsSeededViolations/secret`:                   `TestCheckerDetectsSeededViolations`,
		`^FuzzParse`:   `FuzzParse`,
		`^TestA[/x]/b`: `TestA[/x]`,
	} {
		if got := topLevel(pat); got != want {
			t.Errorf("topLevel(%q) = %q, want %q", pat, got, want)
		}
	}
}

// Every row names tests that exist: a pattern whose top level matches no
// test function of the repository would make its row "not run" in the
// next make reliability, so it fails here first, in make test.
func TestEveryRowNamesAnExistingTest(t *testing.T) {
	funcs := testFunctions(t, filepath.Join("..", ".."))
	if len(funcs) < 100 {
		t.Fatalf("found %d test functions; the scan is broken", len(funcs))
	}
	filter := regexp.MustCompile(runFilter(rows))
	for _, r := range rows {
		if len(r.tests) == 0 {
			t.Errorf("row %q names no test", r.fault)
		}
		for _, pat := range r.tests {
			top := regexp.MustCompile("^" + topLevel(pat))
			found := false
			for _, f := range funcs {
				if top.MatchString(f) {
					found = true
					if !filter.MatchString(f) {
						t.Errorf("%s (row %q) is not selected by the run pattern", f, r.fault)
					}
				}
			}
			if !found {
				t.Errorf("row %q: no test function matches %s", r.fault, pat)
			}
		}
	}
}

func testFunctions(t *testing.T, root string) []string {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)\w+)\(`)
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			out = append(out, m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

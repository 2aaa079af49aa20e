package main

import (
	"path/filepath"
	"regexp"
	"runtime"
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
// next make reliability, so it fails here first, in make test. Each test
// is selected by the run that make reliability gives it: the load rows'
// (area load) are exactly the tests of files of the build tag reliability,
// selected with -load, and every load test is named by a row (a load test
// no row names would never run).
func TestEveryRowNamesAnExistingTest(t *testing.T) {
	funcs, err := scanTests(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(funcs) < 100 {
		t.Fatalf("found %d test functions; the scan is broken", len(funcs))
	}
	type run struct {
		filter *regexp.Regexp
		pkgs   map[string]bool
	}
	runs := map[bool]run{}
	for _, load := range []bool{false, true} {
		pattern, pkgs := selection(rows, funcs, load)
		r := run{regexp.MustCompile(pattern), map[string]bool{}}
		for _, p := range pkgs {
			r.pkgs[p] = true
		}
		runs[load] = r
	}
	named := map[testFunc]bool{}
	for _, r := range rows {
		if len(r.tests) == 0 {
			t.Errorf("row %q names no test", r.fault)
		}
		for _, pat := range r.tests {
			top := regexp.MustCompile("^" + topLevel(pat))
			found := false
			for _, f := range funcs {
				if !top.MatchString(f.name) {
					continue
				}
				found = true
				named[f] = true
				if f.load != (r.area == "load") {
					t.Errorf("%s (row %q, area %s): load test %v; the load rows' tests, and only theirs, are in files of build tag %s", f.name, r.fault, r.area, f.load, loadTag)
				}
				if run := runs[f.load]; !run.filter.MatchString(f.name) || !run.pkgs[f.pkg] {
					t.Errorf("%s in %s (row %q) is not selected by its run (-load=%v)", f.name, f.pkg, r.fault, f.load)
				}
			}
			if !found {
				t.Errorf("row %q: no test function matches %s", r.fault, pat)
			}
		}
	}
	loads := 0
	for _, f := range funcs {
		if f.load {
			loads++
			if !named[f] {
				t.Errorf("%s in %s is a load test (build tag %s) no row names: it would never run", f.name, f.pkg, loadTag)
			}
		}
	}
	if loads == 0 {
		t.Errorf("no test function is in a file of build tag %s; the scan is broken", loadTag)
	}
}

// The build constraint decides what a load test is.
func TestLoadOnly(t *testing.T) {
	for src, want := range map[string]bool{
		"//go:build reliability\n\npackage x_test\n":                  true,
		"// A comment.\n\n//go:build reliability\n\npackage x_test\n": true,
		"//go:build reliability && " + runtime.GOOS + "\npackage x\n": true,
		"//go:build !reliability\n\npackage x_test\n":                 false,
		"//go:build reliability || linux || !linux\npackage x\n":      false,
		"package x_test\n\n//go:build reliability\n":                  false,
		"package x_test\n": false,
	} {
		got, err := loadOnly([]byte(src))
		if err != nil || got != want {
			t.Errorf("loadOnly(%q) = %v, %v; want %v", src, got, err, want)
		}
	}
	if p := runFilter(nil); regexp.MustCompile(p).MatchString("TestAnything") {
		t.Errorf("an empty selection's pattern %q selects tests", p)
	}
}

// TestMutantsSummaryCountsLaterRuns: the summary carries the full run's
// line and the count of every section appended after it.
func TestMutantsSummaryCountsLaterRuns(t *testing.T) {
	doc := "# Mutants\n\nLast run: 2026-12-06, commit aaa, linux/amd64, 35m. **63 planted: 63 caught, 0 survived.**\n\n| a | b |\n\n## A later run\n\nRun: 2026-12-07, commit bbb, linux/amd64, 10m (the mutants whose name contains \"x\", of 69). **8 planted: 7 caught, 1 survived.**\n"
	got := mutantsSummary([]byte(doc))
	for _, want := range []string{"**63 planted: 63 caught, 0 survived.**", "2026-12-07, commit bbb, linux/amd64, 10m: **8 planted: 7 caught, 1 survived.**"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
	if got := mutantsSummary([]byte("# Mutants\n")); got != "MUTANTS.md has no last run." {
		t.Errorf("a report without a run summarised as %q", got)
	}
}

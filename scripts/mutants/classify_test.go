package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// ev is a line of go test -json.
func ev(action, pkg, test, output string) string {
	b, _ := json.Marshal(event{Action: action, Package: pkg, Test: test, Output: output})
	return string(b)
}

const pkg = "github.com/specsync/specsync/pkg/x"

// Each kind of run is told apart: only a test failing for a reason of
// its own is a failure; a build error, a failure setting up (the
// emulators missing) and a timeout are not, whatever tests they fail.
func TestClassify(t *testing.T) {
	cases := []struct {
		name       string
		lines      []string
		failedExit bool
		verdict    string
		failed     []string
	}{
		{"passed", []string{
			ev("run", pkg, "TestA", ""), ev("pass", pkg, "TestA", ""), ev("pass", pkg, "", ""),
		}, false, verdictPassed, nil},
		{"a real failure, subtests counted once", []string{
			ev("run", pkg, "TestA", ""), ev("output", pkg, "TestA/one", "    a_test.go:12: got 2, want 1\n"),
			ev("fail", pkg, "TestA/one", ""), ev("fail", pkg, "TestA", ""), ev("pass", pkg, "TestB", ""), ev("fail", pkg, "", ""),
		}, true, verdictFailed, []string{"TestA"}},
		{"a panic of the code under test is a failure", []string{
			ev("run", pkg, "TestA", ""), ev("output", pkg, "TestA", "panic: runtime error: invalid memory address or nil pointer dereference\n"),
			ev("fail", pkg, "TestA", ""), ev("fail", pkg, "", ""),
		}, true, verdictFailed, []string{"TestA"}},
		{"build error as test2json reports it", []string{
			`{"ImportPath":"` + pkg + ` [` + pkg + `.test]","Action":"build-output","Output":"x.go:3:1: syntax error\n"}`,
			`{"ImportPath":"` + pkg + ` [` + pkg + `.test]","Action":"build-fail"}`,
			`{"Action":"fail","Package":"` + pkg + `","FailedBuild":"` + pkg + ` [` + pkg + `.test]"}`,
		}, true, verdictBuild, nil},
		{"build error as go prints it", []string{
			"# " + pkg, "x.go:3:1: undefined: y [build failed]", "FAIL\t" + pkg + " [build failed]",
		}, true, verdictBuild, nil},
		{"emulator not set is setup, not a catch", []string{
			ev("run", pkg, "TestA", ""), ev("output", pkg, "TestA", "    env_test.go:20: FIRESTORE_EMULATOR_HOST is not set: run the tests through make test\n"),
			ev("fail", pkg, "TestA", ""), ev("fail", pkg, "", ""),
		}, true, verdictSetup, nil},
		{"emulator not answering is setup", []string{
			ev("run", pkg, "TestA", ""), ev("output", pkg, "TestA/sub", "    x.go:1: PUBSUB_EMULATOR_HOST=127.0.0.1:1 does not answer: run the tests through make test\n"),
			ev("fail", pkg, "TestA/sub", ""), ev("fail", pkg, "TestA", ""), ev("fail", pkg, "", ""),
		}, true, verdictSetup, nil},
		{"a setup panic in TestMain", []string{
			ev("output", pkg, "", "panic: FIRESTORE_EMULATOR_HOST is not set: run the tests through make test\n"), ev("fail", pkg, "", ""),
		}, true, verdictSetup, nil},
		{"a timeout fails the test that ran, and is a timeout", []string{
			ev("run", pkg, "TestA", ""), ev("output", pkg, "TestA", "panic: test timed out after 10m0s\n"),
			ev("fail", pkg, "TestA", ""), ev("fail", pkg, "", ""),
		}, true, verdictTimeout, nil},
		{"a setup failure beside a real one is a failure", []string{
			ev("output", pkg, "TestA", "    FIRESTORE_EMULATOR_HOST is not set: x\n"), ev("fail", pkg, "TestA", ""),
			ev("output", pkg, "TestB", "    b_test.go:3: wrong\n"), ev("fail", pkg, "TestB", ""), ev("fail", pkg, "", ""),
		}, true, verdictFailed, []string{"TestB"}},
		{"nothing ran", []string{ev("output", pkg, "", "testing: warning: no tests to run\n"), ev("pass", pkg, "", "")}, false, verdictNoTests, nil},
		{"go failed without a test failing", []string{"go: unknown flag -x"}, true, verdictError, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(strings.NewReader(strings.Join(tc.lines, "\n")+"\n"), tc.failedExit)
			if got.verdict != tc.verdict || !slices.Equal(got.failed, tc.failed) {
				t.Errorf("classify = %q failed %v (%s), want %q failed %v", got.verdict, got.failed, got.detail, tc.verdict, tc.failed)
			}
		})
	}
}

// A mutant is caught only when its tests pass without it and fail, for a
// reason of their own, on both runs with it; anything else is named for
// what it is.
func TestPlantCountsOnlyRealCatchesSeenTwice(t *testing.T) {
	passed := runResult{verdict: verdictPassed, tests: 3}
	failed := runResult{verdict: verdictFailed, tests: 3, failed: []string{"TestA"}}
	setup := runResult{verdict: verdictSetup, tests: 3, detail: "FIRESTORE_EMULATOR_HOST is not set"}
	build := runResult{verdict: verdictBuild, detail: "x.go:1: undefined"}
	timeout := runResult{verdict: verdictTimeout, detail: "panic: test timed out after 1s"}
	cases := []struct {
		name string
		runs []runResult // baseline, then each planted run
		want string
		ran  int
	}{
		{"caught twice", []runResult{passed, failed, failed}, outcomeCaught, 3},
		{"caught once: flaky", []runResult{passed, failed, passed}, outcomeFlaky, 3},
		{"caught, then a timeout: flaky", []runResult{passed, failed, timeout}, outcomeFlaky, 3},
		{"survived", []runResult{passed, passed}, outcomeSurvived, 2},
		{"baseline fails: never planted", []runResult{failed}, outcomeBaseline, 1},
		{"baseline cannot set up", []runResult{setup}, outcomeBaseline, 1},
		{"setup failure with the bug", []runResult{passed, setup}, verdictSetup, 2},
		{"build error", []runResult{passed, build}, verdictBuild, 2},
		{"timeout", []runResult{passed, timeout}, verdictTimeout, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(dir+"/x.go", []byte("package x\n\nconst ok = true\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ran := 0
			tr := tester{dir: dir, baselines: map[string]runResult{}, goTest: func(_ context.Context, dir string, args []string) runResult {
				b, _ := os.ReadFile(dir + "/x.go")
				planted := strings.Contains(string(b), "ok = false")
				if planted != (ran > 0) {
					t.Errorf("run %d: planted %v", ran, planted)
				}
				// The baseline runs the package whole, the first planted
				// run stops at its first failure, the second runs what
				// the first saw fail.
				got := strings.Join(args, " ")
				want := []string{"-count=1 -json -timeout 0s ./x", "-failfast ./x", "-run ^(TestA)$ ./x"}[min(ran, 2)]
				if !strings.HasSuffix(got, want) {
					t.Errorf("run %d: go %s, want it to end in %s", ran, got, want)
				}
				ran++
				if ran > len(tc.runs) {
					t.Errorf("go test run %d, want at most %d", ran, len(tc.runs))
					return runResult{verdict: verdictFailed}
				}
				return tc.runs[ran-1]
			}}
			r := tr.plant(mutant{name: "m", file: "x.go", old: "ok = true", new: "ok = false", pkgs: []string{"./x"}})
			if r.outcome != tc.want || ran != tc.ran {
				t.Errorf("outcome %q after %d runs (%s), want %q after %d", r.outcome, ran, r.detail, tc.want, tc.ran)
			}
			if b, _ := os.ReadFile(dir + "/x.go"); !strings.Contains(string(b), "ok = true") {
				t.Errorf("the file was not put back: %s", b)
			}
		})
	}
}

// Each package's baseline runs once for the whole run: a mutant whose
// packages all passed alone is not run on the unchanged copy again.
func TestBaselinesRunOncePerPackage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/x.go", []byte("package x\n\nconst ok, no = true, false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var runs []string
	tr := tester{dir: dir, baselines: map[string]runResult{}, goTest: func(_ context.Context, dir string, args []string) runResult {
		runs = append(runs, strings.Join(args, " "))
		return runResult{verdict: verdictPassed, tests: 2}
	}}
	r1 := tr.plant(mutant{name: "a", file: "x.go", old: "ok, no = true", new: "ok, no = false", pkgs: []string{"./x", "./y"}})
	r2 := tr.plant(mutant{name: "b", file: "x.go", old: "no = true, false", new: "no = true, true", pkgs: []string{"./y", "./z"}})
	if r1.outcome != outcomeSurvived || r2.outcome != outcomeSurvived || r1.baseline != 4 || r2.baseline != 4 {
		t.Fatalf("outcomes %q %q, baselines %d %d", r1.outcome, r2.outcome, r1.baseline, r2.baseline)
	}
	want := []string{"./x", "./y", "-failfast ./x ./y", "./z", "-failfast ./y ./z"}
	if len(runs) != len(want) {
		t.Fatalf("go test ran %d times, want %d: %q", len(runs), len(want), runs)
	}
	for i, w := range want {
		if !strings.HasSuffix(runs[i], " "+w) {
			t.Errorf("run %d: go %s, want it to end in %s", i, runs[i], w)
		}
	}
}

// The run refuses to start without both emulators answering.
func TestEmulatorsCheckedFirst(t *testing.T) {
	env := map[string]string{}
	err := checkEmulators(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "FIRESTORE_EMULATOR_HOST is not set") || !strings.Contains(err.Error(), "PUBSUB_EMULATOR_HOST is not set") {
		t.Errorf("no emulators: %v", err)
	}
	env["FIRESTORE_EMULATOR_HOST"], env["PUBSUB_EMULATOR_HOST"] = "127.0.0.1:1", "127.0.0.1:1"
	if err := checkEmulators(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("emulators named but not there: %v", err)
	}
}

// Every mutant plants in the code as it is (its text there exactly once:
// a stale one is a promise unguarded by the run), its packages exist,
// names are unique, and one that narrows its tests says why.
func TestEveryMutantPlants(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range mutants {
		if seen[m.name] {
			t.Errorf("two mutants named %q", m.name)
		}
		seen[m.name] = true
		b, err := os.ReadFile("../../" + m.file)
		if err != nil {
			t.Errorf("%s: %v", m.name, err)
			continue
		}
		if n := strings.Count(string(b), m.old); n != 1 {
			t.Errorf("%s: its text is in %s %d times, want once: update the mutant", m.name, m.file, n)
		}
		if m.run != "" && m.why == "" {
			t.Errorf("%s narrows its tests to %s without saying why", m.name, m.run)
		}
		for _, p := range m.pkgs {
			if info, err := os.Stat("../../" + p); err != nil || !info.IsDir() {
				t.Errorf("%s: package %s is not a directory of the repository", m.name, p)
			}
		}
	}
}

// A later run is a section of its own after the last report: its line
// says what it ran and on which commit, and it repeats no introduction.
func TestLaterRunIsASection(t *testing.T) {
	r := []result{{mutant: mutant{name: "m", promise: "p", file: "x.go", pkgs: []string{"./x"}}, outcome: outcomeCaught, first: runResult{failed: []string{"TestA"}}, baseline: 3}}
	full := render(r, time.Minute, "", "commit abc", false)
	later := render(r, time.Minute, "m", "commit def", true)
	if !strings.HasPrefix(full, "# Mutants\n") || !strings.Contains(full, "Last run: ") || !strings.Contains(full, "commit abc") {
		t.Errorf("full report:\n%s", full)
	}
	if !strings.HasPrefix(later, "\n## A later run\n\nRun: ") || strings.Contains(later, "# Mutants") || strings.Contains(later, "Last run") || !strings.Contains(later, "commit def") || !strings.Contains(later, `contains "m"`) {
		t.Errorf("later section:\n%s", later)
	}
	if !strings.Contains(later, "| caught (twice) by TestA |") || !strings.Contains(later, "(3 ran)") {
		t.Errorf("later section's row:\n%s", later)
	}
}

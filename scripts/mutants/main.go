// Command mutants plants small bugs in a copy of the repository, one at a
// time, and runs the tests of the packages that own each promise: one bug
// per promise the README lists and per guarantee of docs/design.md (and
// the HTTP surface's input contract, docs/api.md). A bug the tests do not
// catch (a survivor) is a promise no test guards. `make mutants` runs it
// with the emulators and writes docs/MUTANTS.md:
//
//	go run ./scripts/mutants                       # every mutant, report on stdout
//	go run ./scripts/mutants -o docs/MUTANTS.md    # and the report to a file
//	go run ./scripts/mutants -only feed            # the mutants whose name contains "feed"
//	go run ./scripts/mutants -only 'a|b' -append -o docs/MUTANTS.md  # a section after the last report
//	go run ./scripts/mutants -list                 # the list, nothing run
//
// A catch cannot be miscounted: the emulators must answer before
// anything runs; each mutant's tests must pass on the unchanged copy
// first (else "baseline fails"); and a catch is a test failing for a
// reason of its own (not a build error, a failure setting up, or a
// timeout: classify) on two runs of the planted copy (one is "flaky").
// The tests run are the owning packages whole; a mutant that narrows
// them with -run says why, and the report shows it. To keep a full run
// well under an hour: each package's baseline runs once (a
// mutant's packages pass together when each passed alone), the first
// planted run stops at its first failure (-failfast), and the second
// runs the tests that failed, and only them.
//
// The working tree is never touched: the repository's files (tracked and
// untracked, not ignored) are copied into a temporary directory once, and
// each bug is a text replacement there, undone after its tests. A
// replacement whose text is not found exactly once is reported as stale
// (the code moved: update the list), never planted elsewhere
// (TestEveryMutantPlants says so before a run). CI does not run it (it
// takes long); run it after changing a guarded rule.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// result is what planting one mutant found.
type result struct {
	mutant
	outcome  string    // caught, survived, flaky, baseline fails, stale, or the verdict of a run that proves nothing
	first    runResult // the first run of the planted copy
	baseline int       // the tests its packages ran without the bug
	detail   string    // why, for any outcome but caught and survived
	duration time.Duration
}

// Outcomes of a mutant beyond the verdicts of classify.
const (
	outcomeCaught   = "caught"
	outcomeSurvived = "survived"
	outcomeFlaky    = "flaky"          // caught once, not the second time
	outcomeBaseline = "baseline fails" // the tests fail without the bug
	outcomeStale    = "stale"          // the text to replace is not there exactly once
)

func main() {
	out := flag.String("o", "", "write the report (Markdown) to this file as well")
	only := flag.String("only", "", "run only the mutants whose name contains this (or one of these, separated by |)")
	list := flag.Bool("list", false, "list the mutants and stop")
	appendTo := flag.Bool("append", false, "with -o and -only: add this run as a section after the report in the file (the mutants added since it)")
	timeout := flag.Duration("timeout", 15*time.Minute, "go test -timeout of each run")
	flag.Parse()
	if *list {
		for _, m := range mutants {
			fmt.Printf("%-70s %s %s\n", m.name, m.file, strings.Join(m.pkgs, " "))
		}
		return
	}
	if err := run(*out, *only, *appendTo, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

func run(out, only string, appendTo bool, timeout time.Duration) error {
	if appendTo && (out == "" || only == "") {
		return errors.New("-append adds the run of some mutants (-only) to a report file (-o)")
	}
	if err := checkEmulators(os.Getenv); err != nil {
		return err
	}
	root, err := gitRoot()
	if err != nil {
		return err
	}
	var chosen []mutant
	for _, m := range mutants {
		for _, part := range strings.Split(only, "|") {
			if strings.Contains(m.name, part) {
				chosen = append(chosen, m)
				break
			}
		}
	}
	if len(chosen) == 0 {
		return fmt.Errorf("no mutant's name contains %q (-list shows them)", only)
	}
	dir, err := os.MkdirTemp("", "specsync-mutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := copyRepo(root, dir); err != nil {
		return err
	}
	rev := revision(root)
	started := time.Now()
	t := tester{dir: dir, timeout: timeout, baselines: map[string]runResult{}}
	var results []result
	for _, m := range chosen {
		r := t.plant(m)
		fmt.Printf("%-14s %-70s %d tests, %s %s\n", r.outcome, m.name, r.baseline, r.duration.Round(time.Second), r.detail)
		results = append(results, r)
	}
	report := render(results, time.Since(started), only, rev, appendTo)
	fmt.Print("\n" + report)
	if out != "" {
		if !filepath.IsAbs(out) {
			out = filepath.Join(root, out)
		}
		if appendTo {
			last, err := os.ReadFile(out)
			if err != nil {
				return fmt.Errorf("-append: %w", err)
			}
			report = string(last) + report
		}
		return os.WriteFile(out, []byte(report), 0o644)
	}
	return nil
}

// checkEmulators fails unless both emulators are named and answer: a run
// without them would see every test fail on its setup.
func checkEmulators(getenv func(string) string) error {
	var errs []error
	for _, env := range []string{"FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"} {
		host := getenv(env)
		if host == "" {
			errs = append(errs, fmt.Errorf("%s is not set: run through make mutants, or go run ./emulator/cmd/withemulators -- go run ./scripts/mutants", env))
			continue
		}
		c, err := net.DialTimeout("tcp", host, 3*time.Second)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%s does not answer: %w", env, host, err))
			continue
		}
		c.Close()
	}
	return errors.Join(errs...)
}

// tester runs go test in the copy; baselines holds the unchanged copy's
// result for each set of packages and pattern already run.
type tester struct {
	dir       string
	timeout   time.Duration
	baselines map[string]runResult
	// goTest runs go test with args in dir (tests replace it).
	goTest func(ctx context.Context, dir string, args []string) runResult
}

// plant runs m's packages' tests on the unchanged copy (each package
// once for the whole run), then with m planted: whole until the first
// failure, and again the tests that failed; and puts the file back.
func (t *tester) plant(m mutant) (r result) {
	r = result{mutant: m}
	start := time.Now()
	defer func() { r.duration = time.Since(start) }()
	path := filepath.Join(t.dir, m.file)
	orig, err := os.ReadFile(path)
	if err != nil || bytes.Count(orig, []byte(m.old)) != 1 {
		r.outcome, r.detail = outcomeStale, fmt.Sprintf("the text to replace is not in %s exactly once", m.file)
		return r
	}
	for _, pkg := range m.pkgs {
		key := pkg + "\x00" + m.run
		base, ok := t.baselines[key]
		if !ok {
			base = t.test(m.run, false, pkg)
			t.baselines[key] = base
		}
		r.baseline += base.tests
		if base.verdict != verdictPassed {
			r.outcome, r.first = outcomeBaseline, base
			r.detail = pkg + ": " + base.verdict + ": " + strings.Join(base.failed, ", ") + base.detail
			return r
		}
	}
	if err := os.WriteFile(path, bytes.Replace(orig, []byte(m.old), []byte(m.new), 1), 0o644); err != nil {
		r.outcome, r.detail = outcomeStale, err.Error()
		return r
	}
	defer os.WriteFile(path, orig, 0o644)
	r.first = t.test(m.run, true, m.pkgs...)
	r.outcome, r.detail = judge(r.first, func() runResult {
		return t.test("^("+strings.Join(r.first.failed, "|")+")$", false, m.pkgs...)
	})
	return r
}

// judge turns the first run of a planted copy into an outcome, asking
// for a second run only when the first caught the mutant.
func judge(first runResult, again func() runResult) (outcome, detail string) {
	switch first.verdict {
	case verdictPassed:
		return outcomeSurvived, ""
	case verdictFailed:
		second := again()
		if second.verdict != verdictFailed {
			return outcomeFlaky, "the second run: " + second.verdict + " " + second.detail
		}
		return outcomeCaught, ""
	default:
		return first.verdict, first.detail
	}
}

// test runs go test over pkgs, narrowed by run unless it is empty;
// failfast stops each package at its first failing test.
func (t *tester) test(run string, failfast bool, pkgs ...string) runResult {
	args := []string{"test", "-count=1", "-json", "-timeout", t.timeout.String()}
	if failfast {
		args = append(args, "-failfast")
	}
	if run != "" {
		args = append(args, "-run", run)
	}
	args = append(args, pkgs...)
	if t.goTest != nil {
		return t.goTest(context.Background(), t.dir, args)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = t.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// go's own errors (a package that does not exist, a build error
	// before any test) come on stderr as text.
	return classify(bytes.NewReader(append(stdout.Bytes(), prefixLines(stderr.Bytes())...)), err != nil)
}

// prefixLines marks go's stderr lines so classify reads them as text.
func prefixLines(b []byte) []byte {
	var out bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		if strings.Contains(l, ".go:") || strings.Contains(l, "cannot find package") || strings.Contains(l, "no required module") {
			l += " [build failed]"
		}
		out.WriteString(l + "\n")
	}
	return out.Bytes()
}

// revision names the code a run planted in: the commit, and whether the
// working tree had changes beside it (they were copied too).
func revision(root string) string {
	b, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "an unknown commit"
	}
	rev := "commit " + strings.TrimSpace(string(b))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err != nil || len(st) > 0 {
		rev += " with uncommitted changes"
	}
	return rev
}

func gitRoot() (string, error) {
	b, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("not in a git repository: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// copyRepo copies the repository's files as the working tree has them
// (tracked and untracked, not ignored) into dir.
func copyRepo(root, dir string) error {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(b), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

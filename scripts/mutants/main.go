// Command mutants plants small bugs in a copy of the repository, one at a
// time, and runs the tests that should catch each: one bug per promise
// the README lists and per guarantee of docs/design.md (and
// the HTTP surface's input contract, docs/api.md). A bug the tests do not
// catch (a survivor) is a promise no test guards. `make mutants` runs it
// with the emulators and writes docs/MUTANTS.md:
//
//	go run ./scripts/mutants                       # every mutant, report on stdout
//	go run ./scripts/mutants -o docs/MUTANTS.md    # and the report to a file
//	go run ./scripts/mutants -only feed            # the mutants whose name contains "feed"
//	go run ./scripts/mutants -list                 # the list, nothing run
//
// The working tree is never touched: the repository's files (tracked and
// untracked, not ignored) are copied into a temporary directory once, and
// each bug is a text replacement there, undone after its tests. A
// replacement whose text is not found exactly once is reported as stale
// (the code moved: update the list), never planted elsewhere. CI does not
// run it (it takes minutes); run it after changing a guarded rule.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// mutant is one planted bug: a replacement of old by new in file, and the
// tests (a go test -run pattern over packages) that must fail with it.
type mutant struct {
	name    string // short, unique
	promise string // the promise it breaks, as README or design.md words it
	file    string
	old     string
	new     string
	pkgs    []string
	run     string
}

var mutants = []mutant{
	// (Breaking out of the catalog's page loop on a failed page is no
	// such bug: the pages before it were full, so the check of a full
	// last page asks for the page after it, which fails the same way.)
	{"outage: a failed fetch taken for an empty listing",
		"an outage changes nothing (a registry outage never empties or damages the catalog)",
		"pkg/reconcile/run.go",
		"\tif err != nil {\n\t\tr.ended, r.rec.Error = api.ResultFetchFailed, err.Error()\n\t\treturn true, nil\n\t}",
		"\tif err != nil {\n\t\tlisting, r.rec.Error = &registry.Listing{}, err.Error()\n\t}",
		[]string{"./pkg/reconcile"}, `^(TestFaultMatrixCatalogPageK|TestScenarioCatalogSecondPageFails|TestFaultMatrixOCI)$`},
	{"broken entry: its spec is marked as if missing",
		"a broken entry keeps its last good version",
		"pkg/reconcile/plan.go",
		"if _, ok := offered[s.ID]; ok || failedEntries[s.Entry] || !scope.has(s.Entry) {",
		"if _, ok := offered[s.ID]; ok || !scope.has(s.Entry) {",
		[]string{"./pkg/reconcile"}, `^(TestFaultMatrixOCIEntries|TestScenarioBadLabelAmongMany)$`},
	{"targeted: a run marks entries it was not told about",
		"a push upstream reaches the catalog at the cost of the entry it names (a targeted run never marks an entry it was not told about)",
		"pkg/reconcile/plan.go",
		"if _, ok := offered[s.ID]; ok || failedEntries[s.Entry] || !scope.has(s.Entry) {",
		"if _, ok := offered[s.ID]; ok || failedEntries[s.Entry] {",
		[]string{"./pkg/reconcile"}, `^(TestMakeTargetedPlanMarksOnlyItsEntries|TestTargetedRunDoesAFullRunsStepsOverItsEntries|TestTargetedRunShareGuard|TestEventsThenAFullRunIsAFullRunAlone)$`},
	{"in use: a marked spec with instances is deleted",
		"nothing in use is deleted",
		"pkg/store/mark.go",
		"\t\tif refs > 0 {\n\t\t\toutcome = Referenced",
		"\t\tif refs < 0 {\n\t\t\toutcome = Referenced",
		[]string{"./pkg/reconcile", "./pkg/osb"}, `^(TestRacesProvisionVersusDelete|TestScenarioProvisionRacesDelete|TestConcurrentProvisionAndDelete|TestBindingsDoNotPinSpecs)$`},
	{"in use: a marked spec takes new instances",
		"nothing in use is deleted (a concurrent provision blocks the delete or fails cleanly)",
		"pkg/store/instances.go",
		"\t\tif rec.State != api.SpecActive {\n\t\t\treturn failure.New(failure.Invalid, \"service %s is marked for deletion and takes no new instances\", inst.SpecID)",
		"\t\tif rec.State == \"never\" {\n\t\t\treturn failure.New(failure.Invalid, \"service %s is marked for deletion and takes no new instances\", inst.SpecID)",
		[]string{"./pkg/store"}, `^TestCreateInstanceRefusesAMarkedSpec$`},
	{"comes back: a marked spec offered again stays marked",
		"a spec that comes back keeps its id (it is unmarked, with the same id)",
		"pkg/store/decide.go",
		"\tcase stored.State == api.SpecMarked:\n\t\treturn Unmarked",
		"\tcase stored.State == api.SpecMarked:\n\t\treturn Unchanged",
		[]string{"./pkg/store", "./pkg/reconcile"}, `^(TestDecideOffer|TestScenarioVanishThenReturn|TestUpsertOutcomes)$`},
	{"unchanged: an unchanged spec is rewritten",
		"an unchanged world costs almost nothing (unchanged specs cause no write)",
		"pkg/store/decide.go",
		"\t\treturn Repaired\n\t}\n\treturn Unchanged\n}",
		"\t\treturn Repaired\n\t}\n\treturn Repaired\n}",
		[]string{"./pkg/store", "./pkg/reconcile"}, `^(TestDecideOffer|TestUpsertOutcomes|TestScenarioUnchangedListingCostsOneRead)$`},
	{"redelivery: a second report of a registry counts again",
		"redelivery is harmless",
		"pkg/bootstrap/rules.go",
		"if _, done := op.Results[registry]; done || op.State != api.InProgress {",
		"if _, done := op.Results[registry]; done && op.State != api.InProgress {",
		[]string{"./pkg/bootstrap", "./pkg/worker"}, `^(TestFirstReportCountsAndTheLastWaitsForTheCommit|TestWorkerRedeliveryCountsOnce|TestWorkerReportsRedeliveredOrRunTwiceCountOnce)$`},
	{"one at a time: the lease of a registry is always granted",
		"one at a time (concurrent reconciles of one registry never interleave)",
		"pkg/store/registries.go",
		"if h != nil && h.Holder != holder && now.Before(h.ExpiresAt) {",
		"if h != nil && h.Holder != holder && now.After(h.ExpiresAt.Add(time.Hour)) {",
		[]string{"./pkg/reconcile", "./pkg/worker"}, `^(TestScenarioConcurrentReconciles|TestLeaseExpires)$`},
	{"secrets: provision parameters stored in the instance",
		"no secret is ever stored, logged or answered",
		"pkg/store/instances.go",
		"\tParameters json.RawMessage `firestore:\"-\" json:\"-\"`\n}",
		"\tParameters json.RawMessage `firestore:\"parameters\" json:\"-\"`\n}",
		[]string{"./pkg/osb"}, `^(TestInstanceLifecycle|TestProvisionSameIDOtherAttributes)$`},
	{"ids: a spec's own id is replaced by a derived one",
		"a spec id never changes once published",
		"pkg/spec/id.go",
		"\tif s.ID == \"\" {\n\t\ts.ID = DeriveSpecID(registry, s.Name)",
		"\tif s.ID != \"-\" {\n\t\ts.ID = DeriveSpecID(registry, s.Name)",
		[]string{"./pkg/spec"}, `^(TestAssignIDs|TestDerivedIDsAreStable|TestDigestSeesIDs)$`},
	{"hold-back: a version that drops a plan in use is adopted",
		"a new version that would strand running instances is held back",
		"pkg/reconcile/plan.go",
		"if blockers := strands(s, c.Spec); len(blockers) > 0 {",
		"if blockers := strands(s, c.Spec); len(blockers) > 1000 {",
		[]string{"./pkg/reconcile"}, `^(TestMakePlanHoldsBackStrandingVersions|TestScenarioHalfUpgradeHeldBack)$`},
	{"feed: the gap check reduced to \"no changes\"",
		"watchers get the real changes, one revision at a time",
		"pkg/osb/changes.go",
		"if len(cs) == 0 || cs[0].Revision != q.since+1 {",
		"if len(cs) == 0 {",
		[]string{"./pkg/osb"}, `^(TestFeedGoneWhenThePrefixIsPruned|FuzzChangeFeed)$`},
	{"edge: . and .. pass the id check",
		"ids are checked at the edge (docs/api.md, the input contract)",
		"pkg/web/input.go",
		"\tcase id == \".\" || id == \"..\":",
		"\tcase id == \"never\":",
		[]string{"./pkg/web", "./pkg/osb"}, `^(TestMalformedIDsEveryRoute|TestCheckID|FuzzInstances)$`},
	{"edge: the store's own text answered",
		"no answer carries the store's text (docs/api.md, the input contract)",
		"pkg/failure/failure.go",
		"\t\tif fe, ok := e.(*Error); ok && fe.Internal {",
		"\t\tif fe, ok := e.(*Error); ok && fe.Internal && false {",
		[]string{"./pkg/failure", "./pkg/store", "./pkg/osb"}, `^(TestDescribe|TestStoreErrorsOfBadNames|TestMalformedIDsEveryRoute|FuzzInstances)$`},
	{"edge: a context stored as a Firestore map",
		"any context OSB allows is recorded (docs/api.md, the input contract)",
		"pkg/store/context.go",
		"\ttext, err := contextText(i.Context)\n\ti.ContextJSON, i.LegacyContext = text, nil",
		"\t_, err := contextText(i.Context)\n\ti.ContextJSON, i.LegacyContext = \"\", i.Context",
		[]string{"./pkg/osb"}, `^(TestAnyContextOSBAllows|FuzzInstances)$`},
	{"edge: a repeated query parameter taken",
		"a repeated query parameter is a 400 (docs/api.md, the input contract)",
		"pkg/web/input.go",
		"\t\tif len(vs) > 1 {",
		"\t\tif len(vs) > 2 {",
		[]string{"./pkg/osb", "./pkg/bootstrap"}, `^(TestRepeatedQueryParameters|TestBootstrapInputContract)$`},
	{"edge: a stalled body taken for none",
		"a body that cannot be read is never taken for an empty one (docs/api.md)",
		"pkg/bootstrap/http.go",
		"\tif err == io.EOF {\n\t\treturn false, nil\n\t}\n\treturn false, err",
		"\tif err != nil {\n\t\treturn false, nil\n\t}\n\treturn false, err",
		[]string{"./pkg/bootstrap"}, `^TestBootstrapInputContract$`},
	{"auth: the first of two Authorization headers taken",
		"Authorization as RFC 9110 has it (docs/api.md)",
		"pkg/web/auth.go",
		"\tcase 1:\n\tdefault:",
		"\tcase 1:\n\tcase -1:",
		[]string{"./pkg/osb", "./pkg/hooks"}, `^(TestAuthorizationParsing|TestHookAuthorizationParsing)$`},
	{"identity: the 413 does not echo the request identity",
		"the request identity is echoed on every answer (docs/api.md)",
		"pkg/osb/handlers.go",
		"return web.RequestIdentity(web.LimitBody(b.cfg.MaxBodyBytes, mux))",
		"return web.LimitBody(b.cfg.MaxBodyBytes, web.RequestIdentity(mux))",
		[]string{"./pkg/osb"}, `^TestRequestIdentityEchoedAndCapped$`},
	{"logs: the push gate lets any body through",
		"no secret is ever logged (and no line is forged: docs/api.md, logs)",
		"emulator/stack/push.go",
		"if err := json.Unmarshal(body, &push); err != nil || push.Message == nil",
		"if err := json.Unmarshal(body, &push); false && (err != nil || push.Message == nil)",
		[]string{"./emulator/stack"}, `^TestPushGate$`},
	{"logs: what the framework prints goes to stderr raw",
		"no line is forged (docs/api.md, logs)",
		"emulator/stack/push.go",
		"\torig := os.Stderr\n\tos.Stderr = w",
		"\torig := os.Stderr\n\t_ = w",
		[]string{"./emulator/stack"}, `^TestRelayStderr$`},
	// (Start closing the nil stack it returns is no such bug alone:
	// Close of a nil stack does nothing. Without that, it panics.)
	{"local stack: Close of a nil stack dereferences it",
		"a stack that cannot start says why (the test stack's errors are not hidden)",
		"emulator/stack/stack.go",
		"\tif s == nil {\n\t\treturn\n\t}\n",
		"",
		[]string{"./emulator/stack"}, `^TestStartFailureReturnsTheError$`},
}

// result is what running one mutant's tests found.
type result struct {
	mutant
	outcome  string // caught, survived, stale, no tests
	tests    int    // tests (and fuzz seeds) that ran
	failed   []string
	duration time.Duration
}

func main() {
	out := flag.String("o", "", "write the report (Markdown) to this file as well")
	only := flag.String("only", "", "run only the mutants whose name contains this")
	list := flag.Bool("list", false, "list the mutants and stop")
	flag.Parse()
	if *list {
		for _, m := range mutants {
			fmt.Printf("%-60s %s\n", m.name, m.file)
		}
		return
	}
	if err := run(*out, *only); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

func run(out, only string) error {
	root, err := gitRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "specsync-mutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := copyRepo(root, dir); err != nil {
		return err
	}
	started := time.Now()
	var results []result
	for _, m := range mutants {
		if only != "" && !strings.Contains(m.name, only) {
			continue
		}
		r := plant(dir, m)
		fmt.Printf("%-9s %-60s %d tests, %s\n", r.outcome, m.name, r.tests, r.duration.Round(time.Second))
		results = append(results, r)
	}
	report := render(results, time.Since(started))
	fmt.Print("\n" + report)
	if out != "" {
		return os.WriteFile(filepath.Join(root, out), []byte(report), 0o644)
	}
	return nil
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

// plant applies m in dir, runs its tests and puts the file back.
func plant(dir string, m mutant) result {
	r := result{mutant: m}
	path := filepath.Join(dir, m.file)
	orig, err := os.ReadFile(path)
	if err != nil || bytes.Count(orig, []byte(m.old)) != 1 {
		r.outcome = "stale"
		return r
	}
	if err := os.WriteFile(path, bytes.Replace(orig, []byte(m.old), []byte(m.new), 1), 0o644); err != nil {
		r.outcome = "stale"
		return r
	}
	defer os.WriteFile(path, orig, 0o644)
	start := time.Now()
	args := append([]string{"test", "-count=1", "-json", "-timeout", "10m", "-run", m.run}, m.pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	_ = cmd.Start()
	buildFailed := false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Action, Test, Output string
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch {
		case ev.Action == "pass" && ev.Test != "":
			r.tests++
		case ev.Action == "fail" && ev.Test != "":
			r.tests++
			if !strings.Contains(ev.Test, "/") {
				r.failed = append(r.failed, ev.Test)
			}
		case ev.Action == "fail" && ev.Test == "" && len(r.failed) == 0:
			buildFailed = true // a package failed without a test failing
		}
	}
	err = cmd.Wait()
	r.duration = time.Since(start)
	switch {
	case err != nil && len(r.failed) > 0:
		r.outcome = "caught"
	case err != nil && buildFailed:
		r.outcome = "no build" // the mutant does not compile: fix the list
	case err != nil:
		r.outcome = "error"
	case r.tests == 0:
		r.outcome = "no tests" // the pattern matches nothing: fix the list
	default:
		r.outcome = "survived"
	}
	return r
}

func render(results []result, took time.Duration) string {
	count := map[string]int{}
	for _, r := range results {
		count[r.outcome]++
	}
	var b strings.Builder
	b.WriteString("# Mutants\n\n")
	b.WriteString("Written by `make mutants` (`go run ./scripts/mutants -o docs/MUTANTS.md`,\n")
	// The link is relative to docs/, where the report goes.
	b.WriteString("the list is in [scripts/mutants/main.go](" + filepath.Join("..", "scripts", "mutants", "main.go") + ")): one\n")
	b.WriteString("small bug per promise of the README and guarantee of\n")
	b.WriteString("[design.md](design.md#guarantees), planted in a copy of the repository,\n")
	b.WriteString("one at a time, with the tests that should catch it. A survivor is a\n")
	b.WriteString("promise no test guards.\n\n")
	fmt.Fprintf(&b, "Last run: %s, %s/%s, %s. **%d planted: %d caught, %d survived",
		time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, took.Round(time.Second),
		len(results), count["caught"], count["survived"])
	for _, o := range []string{"stale", "no tests", "no build", "error"} {
		if count[o] > 0 {
			fmt.Fprintf(&b, ", %d %s", count[o], o)
		}
	}
	b.WriteString(".**\n\n")
	b.WriteString("| promise | bug planted | tests | result |\n|---|---|---|---|\n")
	for _, r := range results {
		res := r.outcome
		if len(r.failed) > 0 {
			res += " by " + strings.Join(r.failed, ", ")
		}
		fmt.Fprintf(&b, "| %s | %s (`%s`) | `%s` in %s (%d ran) | %s |\n", r.promise, r.name, r.file, strings.ReplaceAll(r.run, "|", `\|`),
			strings.Join(r.pkgs, " "), r.tests, res)
	}
	return b.String()
}

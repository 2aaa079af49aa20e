package main

import (
	"bufio"
	"encoding/json"
	"io"
	"regexp"
	"sort"
	"strings"
)

// A run of go test ends in one of these verdicts. Only verdictFailed is
// evidence against a mutant: every other failure says nothing about the
// promise (the code did not build, the test could not set up, or ran
// out of time), and is never counted as a catch.
const (
	verdictPassed  = "passed"      // tests ran, none failed
	verdictFailed  = "failed"      // a test failed for a reason of its own
	verdictBuild   = "build error" // a package or its tests did not build
	verdictSetup   = "setup"       // a test failed or panicked setting up (an emulator missing)
	verdictTimeout = "timeout"     // the test binary ran out of time
	verdictNoTests = "no tests"    // nothing ran
	verdictError   = "error"       // go test failed without a test failing
)

// setupMarkers are texts of failures that happen before a test tests
// anything: the emulators missing or not answering (emulatortest's
// requireEmulator), the in-process registry not starting.
var setupMarkers = regexp.MustCompile(`EMULATOR_HOST is not set|EMULATOR_HOST=\S* does not answer|start OCI registry:|\[setup failed\]`)

// timeoutMarker is what the test binary prints when -timeout fires.
const timeoutMarker = "panic: test timed out after"

// runResult is what one go test -json run said.
type runResult struct {
	verdict string
	tests   int      // tests, subtests and fuzz seeds that passed or failed
	failed  []string // the top-level tests that failed for a reason of their own
	detail  string   // for any other verdict: the first line that says why
}

// event is a line of go test -json (test2json).
type event struct {
	Action, Package, Test, Output string
	FailedBuild                   string
}

// classify reads go test -json output and says what the run showed; exit
// is whether go test exited non-zero.
func classify(r io.Reader, failedExit bool) runResult {
	var res runResult
	output := map[string]*strings.Builder{} // by package and top-level test ("" for the package's own lines)
	out := func(pkg, test string) *strings.Builder {
		k := pkg + "\x00" + top(test)
		if output[k] == nil {
			output[k] = &strings.Builder{}
		}
		return output[k]
	}
	failedTests := map[string]bool{} // package + top-level test
	build := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			// Not test2json: go's own text (a build error printed
			// before the tests).
			if strings.Contains(sc.Text(), "[build failed]") || strings.Contains(sc.Text(), "[setup failed]") {
				build = build || strings.Contains(sc.Text(), "[build failed]")
				out("", "").WriteString(sc.Text() + "\n")
			}
			continue
		}
		switch ev.Action {
		case "output", "build-output":
			out(ev.Package, ev.Test).WriteString(ev.Output)
		case "build-fail":
			build = true
		case "pass":
			if ev.Test != "" {
				res.tests++
			}
		case "fail":
			switch {
			case ev.FailedBuild != "":
				build = true
			case ev.Test != "":
				res.tests++
				failedTests[ev.Package+"\x00"+top(ev.Test)] = true
			}
		}
	}
	all := func() string {
		var b strings.Builder
		for _, o := range output {
			b.WriteString(o.String())
		}
		return b.String()
	}
	firstLine := func(text string, match func(string) bool) string {
		for _, l := range strings.Split(text, "\n") {
			if match(l) {
				return strings.TrimSpace(l)
			}
		}
		return ""
	}
	switch {
	case build || strings.Contains(all(), "[build failed]"):
		res.verdict = verdictBuild
		res.detail = firstLine(all(), func(l string) bool { return strings.Contains(l, ".go:") || strings.Contains(l, "build failed") })
		return res
	case strings.Contains(all(), timeoutMarker):
		// The binary died of its timeout: whatever failed with it
		// failed for that.
		res.verdict = verdictTimeout
		res.detail = firstLine(all(), func(l string) bool { return strings.Contains(l, timeoutMarker) })
		return res
	}
	var setup []string
	for k := range failedTests {
		text := output[k].String()
		if setupMarkers.MatchString(text) {
			setup = append(setup, firstLine(text, setupMarkers.MatchString))
			continue
		}
		res.failed = append(res.failed, k[strings.Index(k, "\x00")+1:])
	}
	sort.Strings(res.failed)
	switch {
	case len(res.failed) > 0:
		res.verdict = verdictFailed
	case len(setup) > 0:
		res.verdict, res.detail = verdictSetup, setup[0]
	case failedExit && setupMarkers.MatchString(all()):
		// A TestMain or package-level panic about setup.
		res.verdict, res.detail = verdictSetup, firstLine(all(), setupMarkers.MatchString)
	case failedExit:
		res.verdict = verdictError
		res.detail = firstLine(all(), func(l string) bool { return strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "FAIL") })
	case res.tests == 0:
		res.verdict = verdictNoTests
	default:
		res.verdict = verdictPassed
	}
	return res
}

// top is the top-level test of a test or subtest name.
func top(test string) string {
	if i := strings.Index(test, "/"); i >= 0 {
		return test[:i]
	}
	return test
}

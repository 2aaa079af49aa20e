package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// render is the Markdown report of a run: a subset (only) says so. A
// later run (later) is a section to append to the last report: the
// mutants added or changed since it, on the code as it is now.
func render(results []result, took time.Duration, only, rev string, later bool) string {
	count := map[string]int{}
	for _, r := range results {
		count[r.outcome]++
	}
	var b strings.Builder
	run := "Last run"
	if later {
		run = "Run"
		b.WriteString("\n## A later run\n\n")
		goto summary
	}
	b.WriteString("# Mutants\n\n")
	b.WriteString("Written by `make mutants` (`go run ./scripts/mutants -o docs/MUTANTS.md`,\n")
	// The link is relative to docs/, where the report goes.
	b.WriteString("the list is in [scripts/mutants/list.go](" + filepath.Join("..", "scripts", "mutants", "list.go") + ")): one\n")
	b.WriteString("small bug per promise of the README and guarantee of\n")
	b.WriteString("[design.md](design.md#guarantees), planted in a copy of the repository,\n")
	b.WriteString("one at a time. Its tests are its owning packages whole (a narrower\n")
	b.WriteString("`-run` says why); they must pass without the bug (else *baseline\n")
	b.WriteString("fails*), and a catch is a test failing for a reason of its own, not a\n")
	b.WriteString("build error, a setup failure or a timeout, on two runs (else *flaky*):\n")
	b.WriteString("the first stops at its first failure, the second runs the tests that\n")
	b.WriteString("failed. *Ran* counts the tests the packages ran without the bug.\n")
	b.WriteString("A survivor is a promise no test guards.\n\n")
summary:
	subset := ""
	if only != "" {
		subset = fmt.Sprintf(" (the mutants whose name contains %q, of %d)", only, len(mutants))
	}
	fmt.Fprintf(&b, "%s: %s, %s, %s/%s, %s%s. **%d planted: %d caught, %d survived",
		run, time.Now().UTC().Format("2006-01-02"), rev, runtime.GOOS, runtime.GOARCH, took.Round(time.Second), subset,
		len(results), count[outcomeCaught], count[outcomeSurvived])
	for _, o := range []string{outcomeFlaky, outcomeBaseline, outcomeStale, verdictBuild, verdictSetup, verdictTimeout, verdictNoTests, verdictError} {
		if count[o] > 0 {
			fmt.Fprintf(&b, ", %d %s", count[o], o)
		}
	}
	b.WriteString(".**\n\n")
	b.WriteString("| promise | bug planted | tests | result |\n|---|---|---|---|\n")
	for _, r := range results {
		res := r.outcome
		if r.outcome == outcomeCaught {
			res += " (twice) by " + strings.Join(r.first.failed, ", ")
		} else if r.detail != "" {
			res += ": " + r.detail
		}
		tests := strings.Join(r.pkgs, " ") + " whole"
		if r.run != "" {
			tests = fmt.Sprintf("`%s` in %s, because %s", r.run, strings.Join(r.pkgs, " "), r.why)
		}
		fmt.Fprintf(&b, "| %s | %s (`%s`) | %s (%d ran) | %s |\n", cell(r.promise), cell(r.name), r.file, cell(tests), r.baseline, cell(res))
	}
	return b.String()
}

// cell is s fit for a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

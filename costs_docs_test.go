package specsync

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/specsync/specsync/emulator/emulatortest"
	"github.com/specsync/specsync/pkg/api"
)

// costQuote is a place the docs quote a counted cost: a pattern of the
// text (whitespace collapsed) whose numbered groups are the figures, in
// order, and the figures the tests assert.
type costQuote struct {
	file    string
	pattern string
	want    []int64
}

func rw(c api.Counts) []int64 { return []int64{c.Reads, c.Writes} }

// costQuotes are every place the docs quote a cost
// emulator/emulatortest/costs.go states.
func costQuotes() []costQuote {
	ec := emulatortest.Event
	three := emulatortest.UnchangedBootstrap(3)
	return []costQuote{
		{"docs/events.md", `\| the worker's status read \| (\d+) \| (\d+) \|`, rw(emulatortest.EventStatusRead)},
		{"docs/events.md", `\| the run, the entry changed:[^|]*\| (\d+) \| (\d+) \|`, rw(emulatortest.EventRunChanged)},
		{"docs/events.md", `\| the commit \(1 change\):[^|]*\| (\d+) \| (\d+) \|`, rw(emulatortest.EventCommit)},
		{"docs/events.md", `\| \*\*all told\*\*[^|]*\| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|`, rw(ec)},
		{"docs/events.md", `\| an entry new upstream:[^|]*\| (\d+) \| (\d+) \|`, rw(emulatortest.EventRunAdded)},
		{"docs/events.md", `\| an entry that did not change[^|]*\| (\d+) \| (\d+) \|`, rw(emulatortest.EventRunUnchanged)},
		{"docs/events.md", `\| a message covered[^|]*\| (\d+) \| (\d+) \|`, rw(emulatortest.EventStatusRead)},
		{"docs/BENCHMARKS.md", `the targeted run costs (\d+) reads and (\d+) writes`, rw(emulatortest.EventRunChanged)},
		{"docs/BENCHMARKS.md", `the commit's (\d+) reads and (\d+) writes an event costs (\d+) reads and (\d+) writes all told`, append(rw(emulatortest.EventCommit), rw(ec)...)},
		{"docs/deploy.md", `\*\*(\d+) \+ (\d+)N Firestore reads and (\d+) \+ N writes\*\*`, []int64{emulatortest.BootstrapFixed.Reads, emulatortest.BootstrapPerRegistry.Reads, emulatortest.BootstrapFixed.Writes}},
		{"docs/deploy.md", `N = 3: (\d+) reads, (\d+) writes\)`, rw(three)},
		{"docs/deploy.md", `Hourly with three registries: (\d+) reads, (\d+) writes`, []int64{24 * three.Reads, 24 * three.Writes}},
		{"docs/deploy.md", `a bootstrap of three: (\d+) reads and (\d+) writes more`, rw(emulatortest.BootstrapOneSpecChanged)},
		{"docs/sources.md", `\| one repository moved \|(?:[^|]*\|){4} (\d+) reads, (\d+) writes \|`, rw(emulatortest.FullRunOneMoved)},
		{"docs/BENCHMARKS.md", `\| one moved, verify off \|(?:[^|]*\|){5} (\d+) reads, (\d+) writes \|`, rw(emulatortest.FullRunOneMoved)},
		{"docs/BENCHMARKS.md", `\| one moved, verify on \|(?:[^|]*\|){5} (\d+) reads, (\d+) writes \|`, rw(emulatortest.FullRunOneMoved)},
	}
}

// eventCostRE finds any sentence of the docs that says what an event
// costs, wherever it is: each must give the one figure.
var eventCostRE = regexp.MustCompile(`(?i)an event costs (\d+) reads and (\d+) writes`)

var spacesRE = regexp.MustCompile(`\s+`)

// TestDocsQuoteTheCountedCosts: every figure the docs quote for a
// counted Firestore cost is the one the tests assert
// (emulator/emulatortest/costs.go), and every place that quotes one is
// still there (a sentence rewritten without it must drop it from
// costQuotes, on purpose).
func TestDocsQuoteTheCountedCosts(t *testing.T) {
	text := map[string]string{}
	read := func(f string) string {
		if s, ok := text[f]; ok {
			return s
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text[f] = spacesRE.ReplaceAllString(string(b), " ")
		return text[f]
	}
	for _, err := range checkCostQuotes(costQuotes(), read) {
		t.Error(err)
	}
	// Any other sentence saying what an event costs.
	files, err := filepath.Glob("docs/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("docs: %v %v", files, err)
	}
	found := 0
	for _, f := range append(files, "README.md") {
		for _, m := range eventCostRE.FindAllStringSubmatch(read(f), -1) {
			found++
			if got := atoiAll(m[1:]); fmt.Sprint(got) != fmt.Sprint(rw(emulatortest.Event)) {
				t.Errorf("%s: %q: an event costs %v (reads, writes), the tests say %v", f, m[0], got, rw(emulatortest.Event))
			}
		}
	}
	if found == 0 {
		t.Error("no sentence of the docs says what an event costs: the scan is vacuous")
	}
}

// checkCostQuotes returns what is wrong with each quote.
func checkCostQuotes(quotes []costQuote, read func(string) string) []error {
	var out []error
	for _, q := range quotes {
		ms := regexp.MustCompile(q.pattern).FindAllStringSubmatch(read(q.file), -1)
		if len(ms) == 0 {
			out = append(out, fmt.Errorf("%s: no text matches %s: the sentence that quoted the cost %v changed; update it or costQuotes", q.file, q.pattern, q.want))
		}
		for _, m := range ms {
			if got := atoiAll(m[1:]); fmt.Sprint(got) != fmt.Sprint(q.want) {
				out = append(out, fmt.Errorf("%s: %q quotes %v, the tests assert %v (emulator/emulatortest/costs.go)", q.file, m[0], got, q.want))
			}
		}
	}
	return out
}

func atoiAll(ss []string) []int64 {
	out := make([]int64, len(ss))
	for i, s := range ss {
		out[i], _ = strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	}
	return out
}

// Planted: a doc that quotes another figure fails the check, and so does
// one whose sentence is gone.
func TestDocsCostCheckCatchesADriftedFigure(t *testing.T) {
	quotes := costQuotes()
	good := map[string]string{}
	for _, f := range []string{"docs/events.md", "docs/BENCHMARKS.md", "docs/deploy.md", "docs/sources.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		good[f] = spacesRE.ReplaceAllString(string(b), " ")
	}
	if errs := checkCostQuotes(quotes, func(f string) string { return good[f] }); len(errs) != 0 {
		t.Fatalf("the docs as they are: %v", errs)
	}
	drifted := func(f string) string {
		if f == "docs/events.md" {
			return strings.Replace(good[f], "| **8** | **7** |", "| **7** | **7** |", 1)
		}
		return good[f]
	}
	if errs := checkCostQuotes(quotes, drifted); len(errs) != 1 || !strings.Contains(errs[0].Error(), "[7 7]") {
		t.Errorf("an event quoted as 7 reads and 7 writes: %v", errs)
	}
	gone := func(f string) string {
		if f == "docs/deploy.md" {
			return strings.Replace(good[f], "Hourly with three registries", "Hourly, three registries", 1)
		}
		return good[f]
	}
	if errs := checkCostQuotes(quotes, gone); len(errs) != 1 || !strings.Contains(errs[0].Error(), "no text matches") {
		t.Errorf("a quoting sentence rewritten: %v", errs)
	}
}

package specsync

import (
	"bufio"
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocs checks the Markdown of the repository as a reader on the code
// host follows it: every relative link names a file of the repository
// (and, with #anchor, a heading of it), no link or reference leaves the
// repository, and no document is empty of headings.
func TestDocs(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	files := markdownFiles(t, root)
	if len(files) < 5 {
		t.Fatalf("found %d Markdown files; the check would be vacuous", len(files))
	}
	docs := map[string]*markdownDoc{}
	for _, f := range files {
		d, err := readMarkdown(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = d
	}
	links := 0
	for f, d := range docs {
		rel, _ := filepath.Rel(root, f)
		for _, l := range d.links {
			links++
			if err := checkLink(root, f, l.target, docs); err != nil {
				t.Errorf("%s:%d: link %q: %v", rel, l.line, l.target, err)
			}
		}
	}
	if links < 25 {
		t.Errorf("found %d links in %d files; the link parser is broken", links, len(files))
	}
}

// TestNoReferenceLeavesTheRepository: the repository is read on its own,
// so neither documents nor code comments may send a reader to files
// outside it (the planning folder next to the checkout), and every path of
// the repository they mention (docs/design.md, pkg/store, ../README.md, a
// glob such as pkg/*/doc.go) exists, with its #anchor if it has one.
func TestNoReferenceLeavesTheRepository(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	mention := repositoryPathMention(t)
	readme, err := readMarkdown(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	outside := regexp.MustCompile(`\.\./shared/|shared/(DESIGN|seeds|osb)`)
	docs := map[string]*markdownDoc{}
	checked, mentions := 0, 0
	for _, f := range sourceFiles(t) {
		if f == "docs_test.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for i, line := range proseLines(f, string(b)) {
			if line == "" {
				continue
			}
			if outside.MatchString(line) {
				t.Errorf("%s:%d: refers outside the repository: %s", f, i+1, strings.TrimSpace(line))
			}
			for _, m := range readmeSection.FindAllStringSubmatch(line, -1) {
				name := m[1] + m[2]
				if !readme.anchors[anchor(name)] {
					t.Errorf("%s:%d: %s: README.md has no section %q (name the doc it moved to, docs/x.md#anchor)", f, i+1, m[0], name)
				}
			}
			for _, m := range mention.FindAllStringSubmatch(line, -1) {
				mentions++
				if err := checkMention(root, f, m[1], strings.TrimPrefix(m[2], "#"), docs); err != nil {
					t.Errorf("%s:%d: %s: %v", f, i+1, m[0], err)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d files; git ls-files found too few", checked)
	}
	if mentions < 100 {
		t.Fatalf("found %d mentions of repository paths; the pattern is broken", mentions)
	}
}

// readmeSection matches a README section named in prose: README "Exit
// codes", the README's "The registries file", (README: Deploy to Google
// Cloud).
var readmeSection = regexp.MustCompile(`README(?:'s)?(?: section)?\s*\\?"([^"\\]+)\\?"|README: ([A-Z][\w ]*\w)`)

// planningWords are words of the plan the code was written to, which a
// reader of the repository cannot look up: a numbered issue, milestone or
// phase, an invariant by number, one part of several. A guarantee is named
// as docs/design.md#guarantees names it. The design's own numbered lists
// are not planning words: "Guarantee 3 (nothing in use is deleted)" and
// "step 5 of a run" can be looked up there.
var planningWords = regexp.MustCompile(`(?i)\b(issue|invariant|milestone|phase)s? #?\d+\b|\bpart #?\d+ of\b`)

// TestNoPlanningWords: code comments and documents speak of the system,
// not of the plan that built it.
func TestNoPlanningWords(t *testing.T) {
	checked := 0
	for _, f := range sourceFiles(t) {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if strings.HasSuffix(f, ".go") {
			text, err = goComments(f, b)
			if err != nil {
				t.Fatal(err)
			}
		}
		checked++
		for i, line := range strings.Split(text, "\n") {
			if m := planningWords.FindString(line); m != "" {
				hint := ""
				if f == "docs/RELIABILITY.md" {
					hint = " (generated: change scripts/reliability)"
				}
				t.Errorf("%s:%d: planning word %q%s: %s", f, i+1, m, hint, strings.TrimSpace(line))
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d files; git ls-files found too few", checked)
	}
	for _, bad := range []string{"see Issue 13", "invariant 3:", "(Invariant #6)", "invariants 3 and 9", "part 2 of 3", "phase 1"} {
		if !planningWords.MatchString(bad) {
			t.Errorf("planningWords misses %q", bad)
		}
	}
	for _, fine := range []string{"step 2 of a run", "Guarantee 3 (nothing in use is deleted)", "the issue is 3 reads", "part of 2 runs", "invariant.Check", "1. **An outage changes nothing.**"} {
		if planningWords.MatchString(fine) {
			t.Errorf("planningWords flags %q", fine)
		}
	}
}

// sourceFiles are the tracked files people read: code, documents, the
// module and the build.
func sourceFiles(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "ls-files", "*.go", "*.md", "*.tf", "Makefile", ".ci/*").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	return strings.Fields(string(out))
}

// goComments is a Go file's comments, each at its own line (other lines
// empty), so a line number is the file's.
func goComments(name string, src []byte) (string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return "", err
	}
	lines := make([]string, bytes.Count(src, []byte("\n"))+1)
	for _, g := range f.Comments {
		for _, c := range g.List {
			at := fset.Position(c.Pos()).Line - 1
			for k, l := range strings.Split(c.Text, "\n") {
				lines[at+k] += l
			}
		}
	}
	return strings.Join(lines, "\n"), nil
}

// repositoryPathMention matches a mention of a path of the repository: one
// that starts with a top-level directory of it (or README.md), optionally
// behind ./ or ../ and followed by a #anchor. Import paths do not match
// (a slash comes before them), nor does a spec named registry/name in a
// command's output (proseLines drops it).
func repositoryPathMention(t *testing.T) *regexp.Regexp {
	t.Helper()
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	seen := map[string]bool{}
	var tops []string
	for _, f := range strings.Fields(string(out)) {
		if dir, _, ok := strings.Cut(f, "/"); ok && !seen[dir] {
			seen[dir] = true
			tops = append(tops, regexp.QuoteMeta(dir))
		}
	}
	if len(tops) < 5 {
		t.Fatalf("top-level directories %v: git ls-files found too few", tops)
	}
	return regexp.MustCompile(`(?:^|[^\w./-])((?:\./|(?:\.\./)+)?(?:(?:` + strings.Join(tops, "|") + `)/[\w./*-]*[\w*]|README\.md))(#[\w-]+)?`)
}

// proseLines are a file's lines as mentions are looked for in them: in a
// Markdown console block only the commands ($ lines), not what they print.
func proseLines(name, text string) []string {
	lines := strings.Split(text, "\n")
	if !strings.HasSuffix(name, ".md") {
		return lines
	}
	console := false
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			console = !console && strings.TrimPrefix(trimmed, "```") == "console"
			continue
		}
		if console && !strings.HasPrefix(trimmed, "$ ") {
			lines[i] = ""
		}
	}
	return lines
}

// checkMention resolves a mentioned path: ../ is relative to the file
// mentioning it, ./ to the file or the repository root, anything else to
// the root. A glob must match something; an anchor into a Markdown file
// must be one of its headings.
func checkMention(root, from, path, frag string, docs map[string]*markdownDoc) error {
	var candidates []string
	switch {
	case strings.HasPrefix(path, "../"):
		candidates = []string{filepath.Join(root, filepath.Dir(from), path)}
	case strings.HasPrefix(path, "./"):
		candidates = []string{filepath.Join(root, filepath.Dir(from), path), filepath.Join(root, path)}
	default:
		candidates = []string{filepath.Join(root, path)}
	}
	for _, c := range candidates {
		if r, err := filepath.Rel(root, c); err != nil || strings.HasPrefix(r, "..") {
			return fmt.Errorf("leaves the repository")
		}
		matches, err := filepath.Glob(c)
		if err != nil {
			return err
		}
		if len(matches) == 0 {
			continue
		}
		if frag == "" || !strings.HasSuffix(c, ".md") {
			return nil
		}
		d, ok := docs[c]
		if !ok {
			if d, err = readMarkdown(c); err != nil {
				return err
			}
			docs[c] = d
		}
		if !d.anchors[frag] {
			return fmt.Errorf("no heading of %s makes the anchor #%s", path, frag)
		}
		return nil
	}
	return fmt.Errorf("no such file or directory in the repository")
}

type markdownLink struct {
	line   int
	target string
}

type markdownDoc struct {
	anchors map[string]bool
	links   []markdownLink
}

func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		if _, err := os.Stat(f); err == nil {
			files = append(files, filepath.Join(root, f))
		}
	}
	return files
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// readMarkdown collects a document's heading anchors (as the code host
// makes them) and its links, outside fenced code and code spans.
func readMarkdown(path string) (*markdownDoc, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &markdownDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			a := anchor(m[2])
			if k := seen[a]; k > 0 {
				d.anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				d.anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			d.links = append(d.links, markdownLink{line: n, target: m[1]})
		}
	}
	return d, sc.Err()
}

// anchor is the code host's id for a heading: lower case, punctuation
// dropped (but hyphens and underscores), spaces turned into hyphens.
func anchor(text string) string {
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func checkLink(root, from, target string, docs map[string]*markdownDoc) error {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return nil
	}
	path, frag, _ := strings.Cut(target, "#")
	dest := from
	if path != "" {
		dest = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
		if r, err := filepath.Rel(root, dest); err != nil || strings.HasPrefix(r, "..") {
			return fmt.Errorf("leaves the repository")
		}
		if _, err := os.Stat(dest); err != nil {
			return fmt.Errorf("no such file")
		}
	}
	if frag == "" {
		return nil
	}
	d, ok := docs[dest]
	if !ok {
		return fmt.Errorf("#%s points into a file that is not Markdown", frag)
	}
	if !d.anchors[frag] {
		return fmt.Errorf("no heading makes the anchor #%s", frag)
	}
	return nil
}

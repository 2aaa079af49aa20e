package specsync

import (
	"bufio"
	"fmt"
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
// outside it (the planning folder next to the checkout).
func TestNoReferenceLeavesTheRepository(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "*.go", "*.md", "*.tf", "Makefile", ".ci/*").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	outside := regexp.MustCompile(`\.\./shared/|shared/(DESIGN|seeds|osb)`)
	checked := 0
	for _, f := range strings.Fields(string(out)) {
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
		for i, line := range strings.Split(string(b), "\n") {
			if outside.MatchString(line) {
				t.Errorf("%s:%d: refers outside the repository: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d files; git ls-files found too few", checked)
	}
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

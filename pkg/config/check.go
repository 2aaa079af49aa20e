package config

// Check validates a registries file offline and reports every problem it
// finds with its line, for `specsync config check`. Load stops at the first
// problem (a function's cold start needs no more); Check keeps going:
// environment references, YAML syntax, unknown or mistyped fields anywhere,
// duplicate names, and each registry's own checks (the ones Load runs).

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/registry"
)

// Problem is one error in a registries file; Line is 1-based (0 when the
// problem has no place, such as an unreadable file).
type Problem struct {
	Line    int    `json:"line"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.Message
	}
	return fmt.Sprintf("%d: %s", p.Line, p.Message)
}

// CheckResult is what Check found.
type CheckResult struct {
	Registries []string  `json:"registries"`
	Problems   []Problem `json:"problems"`
}

// OK reports whether the file has no problem.
func (r *CheckResult) OK() bool { return len(r.Problems) == 0 }

// Report is a check of file as `specsync config check --output json`
// prints it.
type Report struct {
	File       string    `json:"file"`
	OK         bool      `json:"ok"`
	Problems   []Problem `json:"problems"`
	Registries []string  `json:"registries"`
}

// Report returns the check of file as printed.
func (r *CheckResult) Report(file string) Report {
	return Report{File: file, OK: r.OK(), Problems: r.Problems, Registries: r.Registries}
}

// CheckFile reads and checks a registries file.
func CheckFile(path string) *CheckResult {
	data, err := os.ReadFile(path)
	if err != nil {
		return &CheckResult{Registries: []string{}, Problems: []Problem{{Message: fmt.Sprintf("registries file: %v", err)}}}
	}
	return Check(data, path, dirOf(path))
}

func dirOf(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[:i+1]
	}
	return "."
}

var (
	yamlLine     = regexp.MustCompile(`line (\d+)`)
	yamlLineText = regexp.MustCompile(`line \d+: `)
)

// maxBadLineScan bounds the file (in lines) whose syntax error is placed
// by firstBadLine, which parses every prefix.
const maxBadLineScan = 2000

// firstBadLine is the first line a YAML document stops parsing at: the
// fewest leading lines that do not parse (0 if the document parses, or
// is too long to scan). The parser's own "line N" is where the construct
// around the problem began (the flow list, the block mapping), often a
// line or more before the problem, and sometimes 0-based.
func firstBadLine(data []byte) int {
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) > maxBadLineScan {
		return 0
	}
	var b strings.Builder
	for i, l := range lines {
		b.WriteString(l)
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(b.String()), &n); err != nil {
			return i + 1
		}
	}
	return 0
}

// Check checks a registries file's content (see Parse for its meaning).
func Check(data []byte, source, baseDir string) *CheckResult {
	res := &CheckResult{Registries: []string{}, Problems: []Problem{}}
	add := func(line, col int, format string, args ...any) {
		res.Problems = append(res.Problems, Problem{Line: line, Column: col, Message: fmt.Sprintf(format, args...)})
	}
	// 1. YAML syntax, with the ${VAR} references replaced in the values
	// (comments are no references) and reported at their lines.
	doc, unset, err := parseExpanded(data)
	if err != nil {
		line := 0
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		line = max(line, firstBadLine(data))
		msg := strings.Replace(err.Error(), "yaml: ", "", 1)
		// The problem's own line leads the message; the parser's (often
		// the line before) would contradict it.
		msg = yamlLineText.ReplaceAllString(msg, "")
		add(line, 0, "%s", msg)
		return finish(res)
	}
	missingOn := map[int]bool{}
	for _, u := range unset {
		add(u.Line, u.Column, "environment variable %s is not set (referenced as ${%s})", u.Name, u.Name)
		missingOn[u.Line] = true
	}
	if len(doc.Content) == 0 {
		add(1, 0, "registries: at least one registry is required (the file is empty)")
		return finish(res)
	}
	root := doc.Content[0]
	// 3. Unknown and mistyped fields, everywhere.
	shapeBad := map[*yaml.Node]bool{}
	checkShape(root, reflect.TypeOf(File{}), "", func(n *yaml.Node, msg string) {
		shapeBad[n] = true
		add(n.Line, n.Column, "%s", msg)
	})
	regs := mapValue(root, "registries")
	if regs == nil || regs.Kind != yaml.SequenceNode || len(regs.Content) == 0 {
		line := root.Line
		if regs != nil {
			line = regs.Line
		}
		add(line, 0, "registries: at least one registry is required")
		return finish(res)
	}
	// 4. Each registry: duplicate names, then the checks Load runs.
	seen := map[string]int{}
	for i, item := range regs.Content {
		where := fmt.Sprintf("registries[%d]", i)
		name := ""
		validName := false
		if n := mapValue(item, "name"); n != nil && n.Kind == yaml.ScalarNode {
			name = n.Value
			where += fmt.Sprintf(" (%s)", name)
			validName = api.IsRegistryName(name)
			if !validName {
				add(n.Line, n.Column, "%s: name %q must be a DNS label: lowercase letters, digits and hyphens, starting with a letter, at most 63", where, name)
			}
			if j, dup := seen[name]; dup {
				add(n.Line, n.Column, "%s: name %q is already used by registries[%d]", where, name, j)
			} else {
				seen[name] = i
				res.Registries = append(res.Registries, name)
			}
		}
		if item.Kind != yaml.MappingNode || spansMissing(item, missingOn) {
			continue // reported above
		}
		reg := known(item, reflect.TypeOf(Registry{}))
		if !validName {
			// Reported above; a stand-in lets the other checks run.
			reg = withName(reg, "name-reported-above")
		}
		one := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Value: "registries"},
			{Kind: yaml.SequenceNode, Content: []*yaml.Node{reg}},
		}}
		b, err := yaml.Marshal(one)
		if err != nil {
			add(item.Line, item.Column, "%s: %v", where, err)
			continue
		}
		_, err = Parse(b, source, baseDir)
		var re *registryError
		msgs := []string{}
		switch {
		case err == nil:
		case errors.As(err, &re):
			// Each problem of the registry at its own field's line.
			for _, e := range re.errs {
				msgs = append(msgs, e.Error())
			}
		default:
			msg := err.Error()
			if k := strings.Index(msg, "registries[0]"); k >= 0 {
				msg = msg[k+len("registries[0]"):]
				msg = strings.TrimPrefix(msg, " (name-reported-above)")
				if name != "" {
					msg = strings.TrimPrefix(msg, fmt.Sprintf(" (%s)", name))
				}
				msg = strings.TrimPrefix(msg, ": ")
			}
			msgs = append(msgs, msg)
		}
		for _, msg := range msgs {
			// A check that finds several problems joins them (errors.Join,
			// one a line): each is reported at its own field's line.
			for _, one := range strings.Split(msg, "\n") {
				at := locate(item, one)
				if holdsAny(scopeOf(item, at), shapeBad) {
					// A field reported above was dropped for this check, and
					// what Load says now is its consequence ("host is required"
					// after "oci.hots: unknown field"): one problem, reported once.
					continue
				}
				add(at.Line, at.Column, "%s: %s", where, one)
			}
		}
	}
	return finish(res)
}

func finish(res *CheckResult) *CheckResult {
	sort.SliceStable(res.Problems, func(i, j int) bool { return res.Problems[i].Line < res.Problems[j].Line })
	return res
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func spansMissing(n *yaml.Node, lines map[int]bool) bool {
	if lines[n.Line] {
		return true
	}
	for _, c := range n.Content {
		if spansMissing(c, lines) {
			return true
		}
	}
	return false
}

var registryType = reflect.TypeOf(Registry{})

// jsonFields maps a struct's JSON names to their field types; a
// registry's are its own and each registered kind's block.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	if t == registryType {
		for _, k := range registry.Kinds() {
			out[k.Type] = reflect.TypeOf(k.New())
		}
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = f.Type
	}
	return out
}

var durationType = reflect.TypeOf(Duration(0))

// checkShape reports keys the type does not have and values of the wrong
// kind, at their own lines.
func checkShape(n *yaml.Node, t reflect.Type, path string, report func(*yaml.Node, string)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	label := path
	if label == "" {
		label = "the file"
	}
	switch {
	case t == durationType:
		if n.Kind != yaml.ScalarNode {
			report(n, fmt.Sprintf("%s: want a duration such as \"30s\"", label))
		}
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			report(n, fmt.Sprintf("%s: want a mapping of fields, found %s", label, kindName(n)))
			return
		}
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			sub := k.Value
			if path != "" {
				sub = path + "." + k.Value
			}
			if !ok {
				report(k, fmt.Sprintf("%s: unknown field (known: %s)", sub, strings.Join(sortedKeys(fields), ", ")))
				continue
			}
			checkShape(v, ft, sub, report)
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			report(n, fmt.Sprintf("%s: want a list, found %s", label, kindName(n)))
			return
		}
		for i, c := range n.Content {
			checkShape(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), report)
		}
	default: // scalars
		if n.Kind != yaml.ScalarNode {
			report(n, fmt.Sprintf("%s: want a single value, found %s", label, kindName(n)))
			return
		}
		switch t.Kind() {
		case reflect.Bool:
			if n.Tag != "!!bool" {
				report(n, fmt.Sprintf("%s: want true or false, found %q", label, n.Value))
			}
		case reflect.Int, reflect.Int64, reflect.Float64:
			if n.Tag != "!!int" && n.Tag != "!!float" {
				report(n, fmt.Sprintf("%s: want a number, found %q", label, n.Value))
			}
		}
	}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

func sortedKeys(m map[string]reflect.Type) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// known returns a copy of a mapping node without the keys its type does
// not have (already reported), so the remaining checks still run.
func known(n *yaml.Node, t reflect.Type) *yaml.Node {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct || t == durationType {
		return n
	}
	fields := jsonFields(t)
	c := *n
	c.Content = nil
	for i := 0; i+1 < len(n.Content); i += 2 {
		ft, ok := fields[n.Content[i].Value]
		if !ok {
			continue
		}
		bad := false
		checkShape(n.Content[i+1], ft, "", func(*yaml.Node, string) { bad = true })
		// A block (a mapping of fields) stays, without its own bad keys:
		// one unknown field in it is reported once, not again as a
		// missing block.
		if bad && isBlock(n.Content[i+1], ft) {
			bad = false
		}
		if !bad {
			c.Content = append(c.Content, n.Content[i], known(n.Content[i+1], ft))
		}
	}
	return &c
}

// isBlock reports whether n is a mapping for a struct of fields.
func isBlock(n *yaml.Node, t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct && t != durationType
}

// withName returns a copy of a registry mapping with its name replaced
// (or added).
func withName(n *yaml.Node, name string) *yaml.Node {
	c := *n
	c.Content = nil
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != "name" {
			c.Content = append(c.Content, n.Content[i], n.Content[i+1])
		}
	}
	c.Content = append(c.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "name"}, &yaml.Node{Kind: yaml.ScalarNode, Value: name})
	return &c
}

var pathToken = regexp.MustCompile(`[a-z_]+(?:\.[a-z_]+)*(?:\[\d+\])?`)

// locate finds the node an error message is about: the deepest field path
// it names (max_mark_share, oci.auth, allow[1], ...), else the registry.
func locate(item *yaml.Node, msg string) *yaml.Node {
	best, depth := item, 0
	for _, tok := range pathToken.FindAllString(msg, -1) {
		idx := -1
		if k := strings.IndexByte(tok, '['); k >= 0 {
			idx, _ = strconv.Atoi(tok[k+1 : len(tok)-1])
			tok = tok[:k]
		}
		n, key := item, (*yaml.Node)(nil)
		parts := strings.Split(tok, ".")
		ok := true
		for _, p := range parts {
			var found bool
			found = false
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == p {
						key, n, found = n.Content[i], n.Content[i+1], true
						break
					}
				}
			}
			if !found {
				ok = false
				break
			}
		}
		if !ok || key == nil {
			continue
		}
		at, d := key, len(parts)
		if idx >= 0 && n.Kind == yaml.SequenceNode && idx < len(n.Content) {
			at, d = n.Content[idx], d+1
		}
		if d > depth {
			best, depth = at, d
		}
	}
	return best
}

// ErrProblems is returned by callers that turn a failed check into an error.
var ErrProblems = errors.New("the registries file has problems")

// scopeOf is what a problem located at at (a key of item, or item itself)
// is about: the key's value, or the whole registry.
func scopeOf(item, at *yaml.Node) *yaml.Node {
	if at == item {
		return item
	}
	var found *yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for i, c := range n.Content {
			if found != nil {
				return
			}
			if c == at {
				if n.Kind == yaml.MappingNode && i%2 == 0 && i+1 < len(n.Content) {
					found = n.Content[i+1]
				} else {
					found = c
				}
				return
			}
			walk(c)
		}
	}
	walk(item)
	if found == nil {
		return item
	}
	return found
}

// holdsAny reports whether n or a node below it is one of set.
func holdsAny(n *yaml.Node, set map[*yaml.Node]bool) bool {
	if n == nil {
		return false
	}
	if set[n] {
		return true
	}
	for _, c := range n.Content {
		if holdsAny(c, set) {
			return true
		}
	}
	return false
}

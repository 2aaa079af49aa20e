package spec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/spec"
)

func specYAML(name string) string {
	return fmt.Sprintf("name: %s\ndescription: The %s service\nplans:\n  - name: default\n    description: The only plan\n", name, name)
}

// indent turns a YAML mapping into a list item.
func listItem(doc string) string {
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	for i := range lines {
		if i == 0 {
			lines[i] = "- " + lines[i]
		} else {
			lines[i] = "  " + lines[i]
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func names(items []spec.ListItem) []string {
	var out []string
	for _, it := range items {
		if it.Spec != nil {
			out = append(out, it.Spec.Name)
		}
	}
	return out
}

func TestParseListForms(t *testing.T) {
	list := listItem(specYAML("alpha")) + listItem(specYAML("beta"))
	wrapped := "specs:\n" + strings.ReplaceAll("\n"+list, "\n", "\n  ")
	json := `[{"name":"alpha","description":"a","plans":[{"name":"p","description":"d"}]},
	          {"name":"beta","description":"b","plans":[{"name":"p","description":"d"}]}]`
	for _, tc := range []struct{ name, in string }{
		{"yaml list", list},
		{"yaml specs mapping", wrapped},
		{"json list", json},
		{"json specs mapping", `{"specs": ` + json + `}`},
		{"base64 list", wrap(b64(list), 76, "\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, err := spec.ParseList([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names(items), ","); got != "alpha,beta" || len(items) != 2 {
				t.Fatalf("specs %q from %d items", got, len(items))
			}
			for i, it := range items {
				if it.Index != i || it.Err != nil || it.Name != it.Spec.Name {
					t.Errorf("item %d: %+v", i, it)
				}
			}
		})
	}
}

// One bad entry does not hide the good ones, and the bad one is named.
func TestParseListBadEntries(t *testing.T) {
	in := listItem(specYAML("alpha")) +
		listItem("name: broken\ndescription: no plans\n") +
		listItem(specYAML("gamma")) +
		listItem("name: typed\ndescription: d\nbindable: perhaps\nplans:\n  - name: p\n    description: d\n") +
		"- just a string\n" +
		"- null\n" +
		listItem("name: [not, a, name]\ndescription: d\n") +
		listItem(specYAML("omega"))
	items, err := spec.ParseList([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 8 {
		t.Fatalf("%d items, want one per entry (8)", len(items))
	}
	if got := strings.Join(names(items), ","); got != "alpha,gamma,omega" {
		t.Errorf("good specs %q", got)
	}
	for _, tc := range []struct {
		index int
		name  string
		want  string
	}{
		{1, "broken", "plans: at least one plan is required"},
		{3, "typed", "bindable: want a boolean, got a string"},
		{4, "", "want a mapping, got a string"},
		{5, "", "empty"},
		{6, "", "name: want a string, got a list"},
	} {
		it := items[tc.index]
		if it.Index != tc.index || it.Name != tc.name || it.Spec != nil || it.Err == nil {
			t.Errorf("item %d: %+v, want the error of entry %q", tc.index, it, tc.name)
			continue
		}
		if !strings.Contains(it.Err.Error(), tc.want) {
			t.Errorf("item %d (%s): error %q does not say %q", tc.index, tc.name, it.Err, tc.want)
		}
	}
}

func TestParseListRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"a single spec", specYAML("alpha"), "want a list of specs or a mapping with a 'specs' list"},
		{"specs not a list", "specs: 3\n", "want a list of specs"},
		{"specs null", "specs: null\n", "want a list of specs"},
		{"a string", "hello", "want a list of specs"},
		{"garbage", "\xff\xfe\x00", "neither YAML nor JSON"},
		{"over MaxIndexBytes", "#" + strings.Repeat("x", spec.MaxIndexBytes) + "\n[]", "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, err := spec.ParseList([]byte(tc.in))
			if err == nil {
				t.Fatalf("parsed %+v, want an error", items)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
	for _, in := range []string{"[]", "specs: []\n"} {
		items, err := spec.ParseList([]byte(in))
		if err != nil || len(items) != 0 {
			t.Errorf("%q: %d items, %v; want an empty index", in, len(items), err)
		}
	}
}

// An index holds many specs: it is bounded by MaxIndexBytes, each entry by
// MaxSpecBytes.
func TestParseListSizes(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() <= 2*spec.MaxSpecBytes; i++ {
		b.WriteString(listItem(specYAML(fmt.Sprintf("service-%04d", i))))
	}
	items, err := spec.ParseList([]byte(b.String()))
	if err != nil {
		t.Fatalf("an index of %d bytes: %v", b.Len(), err)
	}
	for _, it := range items {
		if it.Err != nil {
			t.Fatalf("item %d: %v", it.Index, it.Err)
		}
	}
	big := listItem(specYAML("huge") + "metadata:\n  longDescription: " + strings.Repeat("x", spec.MaxSpecBytes) + "\n")
	items, err = spec.ParseList([]byte(listItem(specYAML("small")) + big))
	if err != nil {
		t.Fatal(err)
	}
	if items[0].Err != nil || items[1].Err == nil || items[1].Name != "huge" || !strings.Contains(items[1].Err.Error(), "more than") {
		t.Errorf("items %+v, want the second one refused for its size", items)
	}
}

// An entry of an index parses exactly as the same spec on its own.
func TestParseListMatchesParse(t *testing.T) {
	one := helloWorldAPB
	alone, err := spec.Parse([]byte(one))
	if err != nil {
		t.Fatal(err)
	}
	items, err := spec.ParseList([]byte(listItem(one) + listItem("name: bad\n")))
	if err != nil {
		t.Fatal(err)
	}
	if items[0].Err != nil || spec.Digest(items[0].Spec) != spec.Digest(alone) {
		t.Errorf("in an index: %+v, %v; alone: %+v", items[0].Spec, items[0].Err, alone)
	}
}

package spec_test

import (
	"encoding/json"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/specsync/specsync/examples"
	"github.com/specsync/specsync/pkg/spec"
)

// FuzzParse checks Parse's contract on any input: it never panics; it
// returns a spec or an error with a message, never both or neither; a spec
// it returns validates, and its JSON encoding parses back to a spec with
// the same digest. ParseList is held to the same on the same input.
//
// Run it with: go test ./pkg/spec -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	entries, err := fs.ReadDir(examples.Registry, examples.RegistryDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		data, err := fs.ReadFile(examples.Registry, path.Join(examples.RegistryDir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add([]byte(wrap(b64(string(data)), 76, "\n")))
		if s, err := spec.Parse(data); err == nil {
			j, _ := json.Marshal(s)
			f.Add(j)
			f.Add([]byte(b64(string(j))))
		}
		f.Add([]byte(listItem(string(data)))) // a one-entry index
	}
	for _, s := range []string{
		minimal,
		helloWorldAPB,
		b64(minimal),
		strings.TrimRight(b64(minimal+" "), "="),
		"specs:\n" + strings.ReplaceAll("\n"+listItem(minimal), "\n", "\n  "),
		`{"name":"demo","description":"d","plans":[{"name":"p","description":"d","parameters":[{"name":"a","type":"number","default":1e999}]}]}`,
		"{\"name\":\"demo\",\"description\":\"\x7f\u0085\",\"plans\":[{\"name\":\"p\",\"description\":\"d\"}]}",
		"name: demo\ndescription: d\nplans:\n  - name: p\n    description: d\n    parameters: &p\n      - {name: a, type: int}\n  - name: q\n    description: d\n    parameters: *p\n",
		"name: demo\ndescription: d\nplans: [{name: p, description: d, free: maybe}]\n",
		"a: &a [x, x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n",
		"", " ", "null", "~", "[]", "{}", "-", ":", "1234", "true", `"x"`, "[[[[", "{{", "!!binary gA==",
		"name: !!binary gA==\ndescription: d\nplans: [{name: p, description: d}]\n",
		"\x00\xff\xfe", "\ufeff" + minimal, "---\n---\n", "? a\n: b\n", "%YAML 1.1\n---\n" + minimal,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := spec.Parse(data)
		switch {
		case err != nil && s != nil:
			t.Fatalf("both a spec and an error: %v", err)
		case err != nil:
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
		case s == nil:
			t.Fatal("neither a spec nor an error")
		default:
			if err := spec.Validate(s); err != nil {
				t.Fatalf("Parse returned a spec that does not validate: %v", err)
			}
			digest := spec.Digest(s)
			j, err := json.Marshal(s)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			again, err := spec.Parse(j)
			if err != nil {
				t.Fatalf("the JSON of a parsed spec does not parse: %v\n%s", err, j)
			}
			if d := spec.Digest(again); d != digest {
				j2, _ := json.Marshal(again)
				t.Fatalf("digest changed through JSON:\n%s\n%s", j, j2)
			}
		}

		items, err := spec.ParseList(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a list error without a message")
			}
			return
		}
		for _, it := range items {
			if (it.Spec == nil) == (it.Err == nil) {
				t.Fatalf("item %d: want exactly one of a spec and an error: %+v", it.Index, it)
			}
			if it.Err != nil && it.Err.Error() == "" {
				t.Fatalf("item %d: an error without a message", it.Index)
			}
			if it.Spec != nil {
				if err := spec.Validate(it.Spec); err != nil {
					t.Fatalf("item %d does not validate: %v", it.Index, err)
				}
			}
		}
	})
}

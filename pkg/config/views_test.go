package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/config"
)

func TestParseViewsErrorsNameLineAndField(t *testing.T) {
	for name, c := range map[string]struct{ file, want string }{
		"bad expression": {"views:\n  - name: a\n    username: a\n    password_env: A\n    registries:\n      allow: [\"(\"]\n",
			`line 5: views[0] (a): registries.allow[0] "(" is not a valid regular expression`},
		"bad tag deny": {"views:\n  - name: a\n    username: a\n    password_env: A\n    tags: {deny: [\"[\"]}\n",
			`line 5: views[0] (a): tags.deny[0] "[" is not a valid regular expression`},
		"unknown field": {"views:\n  - name: a\n    username: a\n    password: secret\n", "line 4: field password not found"},
		"name":          {"views:\n  - name: A_b\n    username: a\n    password_env: A\n", `line 2: views[0] (A_b): name "A_b" must be a DNS label`},
		"no username":   {"views:\n  - name: a\n    password_env: A\n", "line 2: views[0] (a): username is required"},
		"colon":         {"views:\n  - name: a\n    username: \"a:b\"\n    password_env: A\n", `line 3: views[0] (a): username "a:b" must not hold a colon`},
		"password_env":  {"views:\n  - name: a\n    username: a\n    password_env: \"$A\"\n", `line 4: views[0] (a): password_env "$A" must name an environment variable`},
		"dup name": {"views:\n  - {name: a, username: a, password_env: A}\n  - {name: a, username: b, password_env: B}\n",
			`line 3: views[1] (a): name "a" is already used by views[0]`},
		"dup user": {"views:\n  - {name: a, username: a, password_env: A}\n  - {name: b, username: a, password_env: B}\n",
			`line 3: views[1] (b): username "a" is already used by views[0]`},
		"none": {"views: []\n", "at least one view is required"},
		"yaml": {"views: [\n", "not valid YAML"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.ParseViews([]byte(c.file), "views.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "views file views.yaml: ") {
				t.Fatalf("error %v, want one naming the file and containing %q", err, c.want)
			}
		})
	}
}

func TestViewRules(t *testing.T) {
	f, err := config.ParseViews([]byte(`views:
  - name: all
    username: all
    password_env: ALL
  - name: data
    username: data
    password_env: DATA
    registries: {allow: [data, "int-.*"], deny: [int-legacy]}
    services: {deny: [".*-beta"]}
    tags: {allow: [database, cache], deny: [deprecated]}
`), "views.yaml")
	if err != nil {
		t.Fatal(err)
	}
	all, data := &f.Views[0], &f.Views[1]
	if !all.All() || data.All() {
		t.Fatalf("All: %v %v, want true false", all.All(), data.All())
	}
	for _, c := range []struct {
		reg, name string
		tags      []string
		anyTags   bool
		want      bool
	}{
		{"data", "pg", []string{"database"}, false, true},
		{"int-eu", "redis", []string{"x", "cache"}, false, true},
		{"int-legacy", "pg", []string{"database"}, false, false}, // deny wins
		{"apps", "pg", []string{"database"}, false, false},       // registry not allowed
		{"data", "pg-beta", []string{"database"}, false, false},  // name denied
		{"data", "pg", []string{"database", "deprecated"}, false, false},
		{"data", "pg", []string{"web"}, false, false}, // no allowed tag
		{"data", "pg", nil, false, false},
		{"data", "pg", nil, true, true},                            // tags unknown: only registry and name
		{"data", "databases", []string{"databases"}, false, false}, // anchored
	} {
		if got := data.Allows(c.reg, c.name, c.tags, c.anyTags); got != c.want {
			t.Errorf("Allows(%s, %s, %v, %v) = %v, want %v", c.reg, c.name, c.tags, c.anyTags, got, c.want)
		}
		if !all.Allows(c.reg, c.name, c.tags, c.anyTags) {
			t.Errorf("a view without rules left out %s/%s", c.reg, c.name)
		}
	}
	if all.Digest() == data.Digest() {
		t.Error("two views with other rules share a digest")
	}
	if got := strings.Join(data.Describe(), "; "); got != "registries allow data, int-.*; registries deny int-legacy; services deny .*-beta; tags allow database, cache; tags deny deprecated" {
		t.Errorf("Describe: %s", got)
	}
}

func TestReadViewsFileOrInlineJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "views.yaml")
	if err := os.WriteFile(path, []byte("views:\n  - {name: a, username: a, password_env: A}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{path, ` {"views":[{"name":"a","username":"a","password_env":"A","services":{"allow":["x"]}}]}`} {
		f, err := config.ReadViews(value)
		if err != nil || len(f.Views) != 1 || f.Views[0].Name != "a" {
			t.Fatalf("ReadViews(%q): %+v %v", value, f, err)
		}
	}
	if _, err := config.ReadViews(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "views file") {
		t.Fatalf("a missing file: %v", err)
	}
}

package examples_test

import (
	"encoding/base64"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/specsync/specsync/examples"
	"github.com/specsync/specsync/pkg/spec"
)

// parsed reads and parses every spec file of the example registry, failing
// the test on any that does not parse.
func parsed(t *testing.T) map[string]*spec.Spec {
	t.Helper()
	entries, err := fs.ReadDir(examples.Registry, examples.RegistryDir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*spec.Spec{}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".yaml" {
			t.Errorf("%s: the example registry holds only *.yaml spec files", e.Name())
			continue
		}
		data, err := fs.ReadFile(examples.Registry, path.Join(examples.RegistryDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s, err := spec.Parse(data)
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		out[e.Name()] = s
	}
	if len(out) == 0 {
		t.Fatal("no spec parsed")
	}
	return out
}

// Every file parses, and is named after its spec: the demo pushes each
// file as repository specs/<base name>, so the repository is the spec name.
func TestEverySpecParses(t *testing.T) {
	var names []string
	for file, s := range parsed(t) {
		if want := strings.TrimSuffix(file, ".yaml"); s.Name != want {
			t.Errorf("%s: spec name %q, want the file's base name %q", file, s.Name, want)
		}
		names = append(names, s.Name)
	}
	sort.Strings(names)
	// The demo registry: a relational database, a cache, a message broker,
	// a web application and object storage.
	want := []string{"object-storage", "postgresql", "rabbitmq", "redis", "wordpress"}
	if !slices.Equal(names, want) {
		t.Errorf("specs %v, want %v", names, want)
	}
}

// The label form (what the demo pushes) parses to the same spec.
func TestLabelFormParsesTheSame(t *testing.T) {
	for file, s := range parsed(t) {
		data, _ := fs.ReadFile(examples.Registry, path.Join(examples.RegistryDir, file))
		fromLabel, err := spec.Parse([]byte(base64Wrapped(data)))
		if err != nil {
			t.Errorf("%s as a label: %v", file, err)
			continue
		}
		if spec.Digest(fromLabel) != spec.Digest(s) {
			t.Errorf("%s: the label form parses to a different spec", file)
		}
	}
}

// What the specs look like: OSB-friendly names, catalog metadata, several
// plans with their own metadata, ids derived except for one spec.
func TestSpecShape(t *testing.T) {
	specs := parsed(t)
	explicit := 0
	ids := map[string]string{}
	for file, s := range specs {
		if s.Version == "" {
			t.Errorf("%s: no version", file)
		}
		if s.Name != strings.ToLower(s.Name) || strings.Contains(s.Name, ".") {
			t.Errorf("%s: name %q is not lowercase letters, digits and hyphens", file, s.Name)
		}
		if len(s.Tags) < 2 {
			t.Errorf("%s: want some tags, got %v", file, s.Tags)
		}
		for _, k := range []string{"displayName", "imageUrl", "documentationUrl", "longDescription", "providerDisplayName", "dependencies"} {
			if v, ok := s.Metadata[k]; !ok || v == "" {
				t.Errorf("%s: metadata.%s is missing", file, k)
			}
		}
		if len(s.Plans) < 2 {
			t.Errorf("%s: %d plan(s), want several", file, len(s.Plans))
		}
		for _, p := range s.Plans {
			if p.Free == nil {
				t.Errorf("%s: plan %s does not say whether it is free", file, p.Name)
			}
			for _, k := range []string{"displayName", "bullets", "cost"} {
				if _, ok := p.Metadata[k]; !ok {
					t.Errorf("%s: plan %s: metadata.%s is missing", file, p.Name, k)
				}
			}
			if len(p.Parameters) == 0 {
				t.Errorf("%s: plan %s has no parameters", file, p.Name)
			}
		}
		if s.ID != "" {
			explicit++
		}
		for _, p := range s.Plans {
			if p.ID != "" {
				t.Errorf("%s: plan %s has an explicit id; the examples derive plan ids", file, p.Name)
			}
		}
		spec.AssignIDs(s, "examples")
		if prev, dup := ids[s.ID]; dup {
			t.Errorf("%s and %s have the same id %s", prev, file, s.ID)
		}
		ids[s.ID] = file
		for _, p := range s.Plans {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("plan %s of %s has the id %s of %s", p.Name, file, p.ID, prev)
			}
			ids[p.ID] = file + " plan " + p.Name
		}
	}
	if explicit != 1 {
		t.Errorf("%d specs with an explicit id, want exactly one (the others derive theirs)", explicit)
	}
	if s := specs["rabbitmq.yaml"]; s != nil && s.ID != "3f6c2a8e-9d41-4b7a-a5e3-1c0d7f2b9e64" {
		t.Errorf("rabbitmq keeps its explicit id, got %s", s.ID)
	}
}

// Across the set the examples use every parameter type the validator
// knows and every parameter feature, so a demo or a test built on them
// exercises all of it. When the validator learns a type, this test asks
// for an example of it.
func TestParameterCoverage(t *testing.T) {
	types := map[string]bool{}
	features := map[string]int{}
	plansUpdating := 0
	bindParams := 0
	for file, s := range parsed(t) {
		for _, p := range s.Plans {
			if len(p.UpdatesTo) > 0 {
				plansUpdating++
			}
			bindParams += len(p.BindParameters)
			for _, list := range [][]spec.Parameter{p.Parameters, p.BindParameters} {
				for _, q := range list {
					types[q.Type] = true
					count := func(feature string, has bool) {
						if has {
							features[feature]++
						}
					}
					count("required", q.Required)
					count("updatable", q.Updatable)
					count("secret", q.Secret())
					count("pattern", q.Pattern != "")
					count("min_length", q.MinLength != nil)
					count("max_length", q.MaxLength != nil)
					count("minimum", q.Minimum != nil)
					count("maximum", q.Maximum != nil)
					count("display_group", q.DisplayGroup != "")
					count("title", q.Title != "")
					count("default", q.Default != nil)
					count("enum", len(q.Enum) > 0)
					if q.Secret() && q.Default != nil {
						t.Errorf("%s: plan %s: secret parameter %s has a default", file, p.Name, q.Name)
					}
				}
			}
		}
	}
	for typ := range spec.ParameterTypes {
		if !types[typ] {
			t.Errorf("no example parameter has type %q", typ)
		}
	}
	for _, f := range []string{"required", "updatable", "secret", "pattern", "min_length", "max_length", "minimum", "maximum", "display_group", "title", "default", "enum"} {
		if features[f] == 0 {
			t.Errorf("no example parameter uses %s", f)
		}
	}
	if plansUpdating < 2 {
		t.Errorf("%d plans with updates_to, want several", plansUpdating)
	}
	if bindParams == 0 {
		t.Error("no example plan has bind_parameters")
	}
}

func base64Wrapped(data []byte) string {
	const width = 76
	enc := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(enc) > width {
		b.WriteString(enc[:width] + "\n")
		enc = enc[width:]
	}
	b.WriteString(enc)
	return b.String()
}

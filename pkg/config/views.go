package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/registry"
)

// The views file: the broker's credentials, one per platform, each with
// the part of the catalog that platform sees (docs/configuration.md,
// "Catalog views"). It names no secret: each view's password is read the
// way the broker's own is, from the variable password_env names
// (VAR itself, VAR_SHA256 or VAR_FILE).
//
//	views:
//	  - name: data
//	    username: k8s-data
//	    password_env: SPECSYNC_VIEW_DATA_PASSWORD
//	    registries: {allow: [internal]}
//	    services:   {deny: [".*-beta"]}
//	    tags:       {allow: [database, cache]}
//
// The rules are the registries file's (registry.Filter): regular
// expressions matched against the whole value, deny wins, an empty allow
// allows everything. registries match the registry's name, services the
// service name, tags each tag: a service is left out when any of its tags
// matches tags.deny and, when tags.allow is set, kept only when one of
// them matches it.

// ViewsFile is the views file.
type ViewsFile struct {
	Views []View `yaml:"views" json:"views"`
}

// View is one view of the views file.
type View struct {
	// Name identifies the view: a DNS label, unique in the file.
	Name string `yaml:"name" json:"name"`
	// Username is the platform's basic-auth user name, unique in the file.
	Username string `yaml:"username" json:"username"`
	// PasswordEnv names the variable the password is read from, as the
	// broker's own: VAR (the password), VAR_SHA256 (its digests) or
	// VAR_FILE (a file holding it, re-read: rotation without a restart).
	PasswordEnv string `yaml:"password_env" json:"password_env"`
	Registries  Rules  `yaml:"registries,omitempty" json:"registries,omitempty"`
	Services    Rules  `yaml:"services,omitempty" json:"services,omitempty"`
	Tags        Rules  `yaml:"tags,omitempty" json:"tags,omitempty"`

	registries, services, tagAllow, tagDeny *registry.Filter
}

// Rules are allow and deny regular expressions, as a registry's.
type Rules struct {
	Allow []string `yaml:"allow,omitempty" json:"allow,omitempty"`
	Deny  []string `yaml:"deny,omitempty" json:"deny,omitempty"`
}

func (r Rules) empty() bool { return len(r.Allow) == 0 && len(r.Deny) == 0 }

// ReadViews reads the views file that SPECSYNC_BROKER_VIEWS gives: its
// content when the value starts with "{" (JSON, as terraform writes it),
// else the path of a YAML (or JSON) file.
func ReadViews(value string) (*ViewsFile, error) {
	v := strings.TrimSpace(value)
	if strings.HasPrefix(v, "{") {
		return ParseViews([]byte(v), "SPECSYNC_BROKER_VIEWS")
	}
	data, err := os.ReadFile(v)
	if err != nil {
		return nil, fmt.Errorf("views file: %w", err)
	}
	return ParseViews(data, v)
}

// ParseViews checks a views file; errors name the file, the line and the
// field.
func ParseViews(data []byte, source string) (*ViewsFile, error) {
	fail := func(err error) (*ViewsFile, error) {
		return nil, fmt.Errorf("views file %s: %w", source, err)
	}
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		return fail(fmt.Errorf("not valid YAML: %w", err))
	}
	var f ViewsFile
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return fail(errors.New(strings.TrimPrefix(strings.ReplaceAll(err.Error(), "\n ", ""), "yaml: ")))
	}
	if len(f.Views) == 0 {
		return fail(errors.New("views: at least one view is required (without views, leave SPECSYNC_BROKER_VIEWS unset)"))
	}
	names, users := map[string]int{}, map[string]int{}
	for i := range f.Views {
		v := &f.Views[i]
		where := func(field string) string {
			w := fmt.Sprintf("views[%d]", i)
			if v.Name != "" {
				w += fmt.Sprintf(" (%s)", v.Name)
			}
			if line := fieldLine(&doc, i, field); line > 0 {
				w = fmt.Sprintf("line %d: %s", line, w)
			}
			return w + ": " + field
		}
		switch {
		case !api.IsRegistryName(v.Name):
			return fail(fmt.Errorf("%s %q must be a DNS label: lowercase letters, digits and hyphens, starting with a letter, at most 63", where("name"), v.Name))
		case v.Username == "":
			return fail(fmt.Errorf("%s is required", where("username")))
		case strings.ContainsAny(v.Username, ":\r\n"):
			return fail(fmt.Errorf("%s %q must not hold a colon or a line break (HTTP basic auth)", where("username"), v.Username))
		case !envName.MatchString(v.PasswordEnv):
			return fail(fmt.Errorf("%s %q must name an environment variable (the password is read from it, from its _SHA256 or from its _FILE)", where("password_env"), v.PasswordEnv))
		}
		if j, dup := names[v.Name]; dup {
			return fail(fmt.Errorf("%s %q is already used by views[%d]", where("name"), v.Name, j))
		}
		if j, dup := users[v.Username]; dup {
			return fail(fmt.Errorf("%s %q is already used by views[%d]: a credential chooses one view", where("username"), v.Username, j))
		}
		names[v.Name], users[v.Username] = i, i
		var err error
		for _, c := range []struct {
			field string
			out   **registry.Filter
			allow []string
			deny  []string
		}{
			{"registries", &v.registries, v.Registries.Allow, v.Registries.Deny},
			{"services", &v.services, v.Services.Allow, v.Services.Deny},
			{"tags", &v.tagAllow, v.Tags.Allow, nil},
			{"tags", &v.tagDeny, nil, v.Tags.Deny},
		} {
			if *c.out, err = registry.NewFilter(c.allow, c.deny); err != nil {
				return fail(fmt.Errorf("%s.%w", where(c.field), err))
			}
		}
	}
	return &f, nil
}

// fieldLine is the line of views[i].field in doc (of views[i] when the
// field is absent; 0 when neither is there).
func fieldLine(doc *yaml3.Node, i int, field string) int {
	if len(doc.Content) == 0 {
		return 0
	}
	root := doc.Content[0]
	for k := 0; k+1 < len(root.Content); k += 2 {
		if root.Content[k].Value != "views" || root.Content[k+1].Kind != yaml3.SequenceNode {
			continue
		}
		items := root.Content[k+1].Content
		if i >= len(items) {
			return 0
		}
		item := items[i]
		for j := 0; j+1 < len(item.Content); j += 2 {
			if item.Content[j].Value == field {
				return item.Content[j].Line
			}
		}
		return item.Line
	}
	return 0
}

// All reports whether the view has no rules: it holds every service.
func (v *View) All() bool {
	return v.Registries.empty() && v.Services.empty() && v.Tags.empty()
}

// Allows reports whether a service is in the view: its registry, its
// name and its tags pass the rules. anyTags says the tags are unknown
// (a change that takes a service out of the catalog carries none): the
// tag rules are then not applied.
func (v *View) Allows(registryName, name string, tags []string, anyTags bool) bool {
	if !v.registries.Allows(registryName) || !v.services.Allows(name) {
		return false
	}
	if anyTags {
		return true
	}
	for _, t := range tags {
		if !v.tagDeny.Allows(t) {
			return false
		}
	}
	if len(v.Tags.Allow) == 0 {
		return true
	}
	for _, t := range tags {
		if v.tagAllow.Allows(t) {
			return true
		}
	}
	return false
}

// Digest identifies the view's name and rules (not its credential): the
// catalog puts it in the view's ETag, so new rules are a new tag.
func (v *View) Digest() string {
	b, _ := json.Marshal(struct {
		Name                       string
		Registries, Services, Tags Rules
	}{v.Name, v.Registries, v.Services, v.Tags})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Describe is the view's rules in a line each, for the status page and
// the CLI ("registries allow a|b", ...); none for a view of everything.
func (v *View) Describe() []string {
	var out []string
	for _, r := range []struct {
		what  string
		rules Rules
	}{{"registries", v.Registries}, {"services", v.Services}, {"tags", v.Tags}} {
		if len(r.rules.Allow) > 0 {
			out = append(out, r.what+" allow "+strings.Join(r.rules.Allow, ", "))
		}
		if len(r.rules.Deny) > 0 {
			out = append(out, r.what+" deny "+strings.Join(r.rules.Deny, ", "))
		}
	}
	return out
}

package terraform_test

// The docs about deploying: the guide walks through the variables and
// outputs the module really has, and the settings table lists what each
// function reads.

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The deployment guide walks through what terraform needs, with the
// variables and outputs it really has.
func TestDeployGuide(t *testing.T) {
	guide, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(guide)
	m := evaluated(t, nil)
	mustMention := []string{"terraform init", "terraform plan", "terraform apply", "gcloud secrets versions add", "registries_file", "registry_env", "/bootstrap", "last_operation", "Prerequisites", "Cost",
		"Register the broker with a platform", "Add a registry", "Trigger a bootstrap by hand",
		"openssl rand", "| sha256sum", "broker_password_sha256", "admin_token_sha256", "Rotating"}
	for name := range m.outputs {
		if name == "broker_url" || name == "bootstrap_url" || name == "secrets" {
			mustMention = append(mustMention, name)
		}
	}
	for _, s := range mustMention {
		if !strings.Contains(section, s) {
			t.Errorf("docs/deploy.md does not mention %q", s)
		}
	}
	for _, v := range regexp.MustCompile("`([a-z_]+)\\s*=").FindAllStringSubmatch(section, -1) {
		if _, ok := m.variables[v[1]]; !ok {
			t.Errorf("docs/deploy.md sets %s, which is not a variable", v[1])
		}
	}
	// And every variable its terraform.tfvars snippets set (the lines at
	// the left margin: an indented key is part of a value, a view's name).
	set := 0
	for _, block := range regexp.MustCompile("(?s)```hcl\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, v := range regexp.MustCompile(`(?m)^([a-z_]+)\s*=`).FindAllStringSubmatch(block[1], -1) {
			set++
			if _, ok := m.variables[v[1]]; !ok {
				t.Errorf("a terraform.tfvars snippet of docs/deploy.md sets %s, which is not a variable", v[1])
			}
		}
	}
	if set < 5 {
		t.Errorf("found %d variables set in docs/deploy.md's hcl blocks; the pattern is broken", set)
	}
}

// The settings table (docs/configuration.md) lists every variable a
// function reads, with exactly the functions that read it, and none that
// no function reads.
func TestSettingsTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Settings (environment)\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## Settings (environment)" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	components := map[string]string{"LoadBootstrap": "bootstrap", "LoadReconcile": "reconcile", "LoadCatalog": "catalog"}
	readBy := map[string][]string{}
	for name, load := range loaders {
		c, ok := components[name]
		if !ok {
			t.Fatalf("settings.%s: which function is it? add it to components", name)
		}
		for k := range keysRead(load) {
			readBy[k] = append(readBy[k], c)
		}
	}
	listed := map[string][]string{}
	names := regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.Contains(cells[1], "`") {
			continue
		}
		var fns []string
		for _, f := range strings.Split(cells[2], ",") {
			switch f = strings.TrimSpace(f); f {
			case "all":
				fns = append(fns, "bootstrap", "reconcile", "catalog")
			case "bootstrap", "reconcile", "catalog":
				fns = append(fns, f)
			}
		}
		if len(fns) == 0 {
			continue // not a function's setting (the local stack's)
		}
		sort.Strings(fns)
		for _, m := range names.FindAllStringSubmatch(cells[1], -1) {
			if _, dup := listed[m[1]]; dup {
				t.Errorf("the settings table lists %s twice", m[1])
			}
			listed[m[1]] = fns
		}
	}
	if len(listed) == 0 {
		t.Fatal("no rows parsed from the settings table: the check would be vacuous")
	}
	for k, fns := range readBy {
		sort.Strings(fns)
		if got, ok := listed[k]; !ok {
			t.Errorf("the settings table does not list %s (read by %s)", k, strings.Join(fns, ", "))
		} else if !reflect.DeepEqual(got, fns) {
			t.Errorf("the settings table says %s is read by %s; it is read by %s", k, strings.Join(got, ", "), strings.Join(fns, ", "))
		}
	}
	for k := range listed {
		if _, ok := readBy[k]; !ok {
			t.Errorf("the settings table lists %s, which no function reads", k)
		}
	}
}

package terraform_test

// The module's shape: formatted as terraform fmt would, one file per
// concern and each resource in the file of its concern.

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclwrite"
)

func TestFormatting(t *testing.T) {
	names, _ := filepath.Glob("*.tf")
	more, _ := filepath.Glob("*.tfvars")
	names = append(names, more...)
	if len(names) == 0 {
		t.Fatal("no .tf files")
	}
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := hclwrite.Format(src); !bytes.Equal(got, src) {
			t.Errorf("%s is not formatted as `terraform fmt` would (hclwrite.Format); formatted:\n%s", name, got)
		}
	}
}

// One file per concern, and each resource in the file of its concern.
func TestOneFilePerConcern(t *testing.T) {
	m := evaluated(t, nil)
	want := []string{"apis.tf", "firestore.tf", "functions.tf", "iam.tf", "monitoring.tf", "outputs.tf", "pubsub.tf", "scheduler.tf", "secrets.tf", "variables.tf", "versions.tf"}
	var got []string
	for name := range m.files {
		got = append(got, name)
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	for _, k := range m.order {
		r := m.resources[k]
		if file := homeOf(r.Type); file == "" {
			t.Errorf("%s (%s): no home file for its type; add it to homeOf", k, r.File)
		} else if r.File != file {
			t.Errorf("%s is in %s, want %s", k, r.File, file)
		}
	}
	if len(m.bodies["variables.tf"].Blocks) == 0 || len(m.bodies["outputs.tf"].Blocks) == 0 {
		t.Error("variables.tf and outputs.tf must hold the variables and outputs")
	}
	for name, b := range m.bodies {
		for _, blk := range b.Blocks {
			if blk.Type == "variable" && name != "variables.tf" || blk.Type == "output" && name != "outputs.tf" {
				t.Errorf("%s %s is in %s", blk.Type, blk.Labels[0], name)
			}
		}
	}
}

// homeOf is the file of a resource type's concern.
func homeOf(typ string) string {
	rules := []struct{ match, file string }{
		{"google_secret_manager_secret_iam_member", "secrets.tf"}, // per-secret access, next to the secrets
		{"_iam_", "iam.tf"},
		{"google_service_account", "iam.tf"},
		{"google_project_service", "apis.tf"},
		{"google_project", "iam.tf"},
		{"google_firestore_", "firestore.tf"},
		{"google_pubsub_", "pubsub.tf"},
		{"google_cloudfunctions2_", "functions.tf"},
		{"google_storage_", "functions.tf"},
		{"archive_file", "functions.tf"},
		{"google_cloud_scheduler_", "scheduler.tf"},
		{"google_logging_metric", "monitoring.tf"},
		{"google_monitoring_", "monitoring.tf"},
		{"google_secret_manager_", "secrets.tf"},
		{"terraform_data", "secrets.tf"},
	}
	for _, r := range rules {
		if strings.Contains(typ, r.match) {
			return r.file
		}
	}
	return ""
}

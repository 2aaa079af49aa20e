//go:build deploycheck

package terraform_test

// What the registries file implies is derived from it: read access for
// the reconcile function's own identity to what its auth.type google
// sources read (Artifact Registry repositories in any project, Cloud
// Storage buckets), and nothing for the sources that bring their own
// credentials.

import (
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestGrantsDerivedFromTheRegistriesFile(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sc       scenario
		readers  []string // Artifact Registry repositories read as the reconcile function
		buckets  []string // Cloud Storage buckets read as it
		projects []string // projects whose gcr topic it subscribes to
	}{
		{shipped, []string{"my-specsync-project/europe/specs"}, nil, []string{"my-specsync-project"}},
		{outside, []string{otherProject + "/europe-west1/specs"}, []string{"acme-charts", "acme-partner-index"}, []string{otherProject}},
		// The reference file's oci-charts reads my-project anonymously:
		// events, no grant; artifact_registry_repositories adds two.
		{reference(t), []string{referenceProject + "/europe/specs", testProject + "/europe/extra", "shared-images/us-central1/team-images"}, nil, []string{referenceProject}},
	} {
		t.Run(c.sc.name, func(t *testing.T) {
			t.Parallel()
			m := planOf(t, c.sc)
			fns := functionsByEntryPoint(t, m)
			reconcile := "serviceAccount:" + fns["Reconcile"].one("template").str("service_account")
			var readers, buckets, projects []string
			for _, b := range bindingsOf(t, m) {
				switch {
				case b.Role == "roles/artifactregistry.reader":
					if b.Member != reconcile {
						t.Errorf("%s grants the Artifact Registry reader role to %s, want the reconcile function's account %s", b.Addr, b.Member, reconcile)
					}
					readers = append(readers, strings.TrimPrefix(b.Scope, "arrepository:"))
				case b.Role == "roles/storage.objectViewer" && b.Member == reconcile:
					buckets = append(buckets, strings.TrimPrefix(b.Scope, "bucket:"))
				}
			}
			for _, s := range m.ofType("google_pubsub_subscription") {
				if strings.HasSuffix(s.str("topic"), "/topics/gcr") {
					projects = append(projects, strings.Split(s.str("topic"), "/")[1])
				}
			}
			// The reconcile function also reads the config bundle.
			bundle := m.instance("google_storage_bucket.config", "").str("name")
			for _, l := range []*[]string{&readers, &buckets, &projects} {
				var keep []string
				for _, v := range *l {
					if v != bundle {
						keep = append(keep, v)
					}
				}
				sort.Strings(keep)
				*l = keep
			}
			for _, w := range [][]string{c.readers, c.buckets, c.projects} {
				sort.Strings(w)
			}
			if !reflect.DeepEqual(readers, c.readers) {
				t.Errorf("Artifact Registry reader grants on %v, want %v", readers, c.readers)
			}
			if !reflect.DeepEqual(buckets, c.buckets) {
				t.Errorf("bucket reader grants on %v, want %v", buckets, c.buckets)
			}
			if !reflect.DeepEqual(projects, c.projects) {
				t.Errorf("gcr subscriptions of %v, want %v", projects, c.projects)
			}
		})
	}
}

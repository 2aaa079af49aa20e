//go:build deploycheck

package terraform_test

// Catalog views: one secret per view from var.broker_views, mounted on
// the catalog (and readable by it alone), the views file in
// SPECSYNC_BROKER_VIEWS as the Go code reads it, and the broker's one
// credential gone.

import (
	"slices"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/settings"
)

func TestBrokerViews(t *testing.T) {
	t.Parallel()
	m := planOf(t, views)
	fns := functionsByEntryPoint(t, m)
	env, _ := envOf(t, fns["Catalog"])

	for _, k := range []string{"SPECSYNC_BROKER_USERNAME", "SPECSYNC_BROKER_PASSWORD_SHA256"} {
		if _, ok := env[k]; ok {
			t.Errorf("with views, the catalog still gets %s (the settings refuse both)", k)
		}
	}
	// The settings load, and the views file is what the Go code reads.
	if _, err := settings.LoadCatalog(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatalf("the catalog's settings do not load: %v", err)
	}
	f, err := config.ReadViews(env["SPECSYNC_BROKER_VIEWS"])
	if err != nil {
		t.Fatalf("SPECSYNC_BROKER_VIEWS: %v", err)
	}
	mounted := mountsOf(t, fns["Catalog"])
	var names []string
	for _, v := range f.Views {
		names = append(names, v.Name)
		cred, err := settings.ReadCredential(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, v.PasswordEnv)
		if err != nil || cred.File == "" {
			t.Errorf("view %s: its password is not a mounted file: %+v %v", v.Name, cred, err)
			continue
		}
		if got, want := mounted[cred.File], "specsync-broker-view-"+v.Name; got != want {
			t.Errorf("view %s: %s is mounted from %q, want the view's secret %q", v.Name, cred.File, got, want)
		}
		readers := 0
		for _, a := range m.ofType("google_secret_manager_secret_iam_member") {
			if a.str("secret_id") == "specsync-broker-view-"+v.Name {
				readers++
				if !strings.Contains(a.str("member"), "catalog") {
					t.Errorf("view %s: its secret is readable by %s, want the catalog alone", v.Name, a.str("member"))
				}
			}
		}
		if readers != 1 {
			t.Errorf("view %s: %d readers of its secret, want the catalog alone", v.Name, readers)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"cf-prod", "k8s-dev"}) {
		t.Errorf("views %v, want cf-prod and k8s-dev", names)
	}
	dev := f.Views[slices.IndexFunc(f.Views, func(v config.View) bool { return v.Name == "k8s-dev" })]
	if dev.Username != "k8s-dev" || !dev.Allows("own", "redis", nil, false) || dev.Allows("own", "redis-legacy", nil, false) || dev.Allows("own", "postgres", nil, false) {
		t.Errorf("the k8s-dev view's rules did not arrive: %+v", dev)
	}

	// Without views: the broker's one credential, as before, and no view
	// secret.
	m = planOf(t, reference(t))
	env, _ = envOf(t, functionsByEntryPoint(t, m)["Catalog"])
	if env["SPECSYNC_BROKER_USERNAME"] == "" || env["SPECSYNC_BROKER_VIEWS"] != "" {
		t.Errorf("without views: username %q, views %q", env["SPECSYNC_BROKER_USERNAME"], env["SPECSYNC_BROKER_VIEWS"])
	}
	for _, s := range m.ofType("google_secret_manager_secret") {
		if strings.Contains(s.str("secret_id"), "broker-view") {
			t.Errorf("without views, a view secret %s", s.str("secret_id"))
		}
	}
}

package functions

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/emulator/googletest"
	"github.com/specsync/specsync/pkg/registry"
)

// The functions register Application Default Credentials for auth type
// google (wiring.go's import of gcpauth): a google registry fetches with
// the process's credentials, here a service account key file. Without
// the registration the fetch would fail, saying no credentials can be
// found. Not parallel: the credentials come from the environment.
func TestFunctionsFindGoogleCredentials(t *testing.T) {
	tokens := googletest.NewTokenServer(t, "wiring")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", tokens.KeyFile(t))
	ar := googletest.NewRegistry(t, tokens)
	label := base64.StdEncoding.EncodeToString([]byte("name: db\ndescription: a db\nplans:\n  - name: p\n    description: p\n"))
	if _, err := emulator.PushSpecImage(context.Background(), ar.PushHost, "project/specs/db", "latest", label, nil); err != nil {
		t.Fatal(err)
	}
	src, err := registry.NewOCI(registry.OCIConfig{Host: "europe-docker.pkg.dev", Prefix: "project/specs",
		Auth: registry.Auth{Type: registry.AuthGoogle}, Transport: googletest.Transport(ar.Server)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := src.Fetch(context.Background(), registry.FetchOptions{})
	if err != nil {
		t.Fatalf("fetch with the functions' Google credentials: %v", err)
	}
	if len(l.Entries) != 1 || l.Entries[0].Spec == nil || tokens.Requests() != 1 {
		t.Fatalf("entries %+v after %d token requests, want db after 1", l.Entries, tokens.Requests())
	}
}

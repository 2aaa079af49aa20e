package main

import (
	"context"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// What the operator binary must not link: the local stack and the
// emulators, the functions and functions-framework, the packages that
// reach Firestore or Pub/Sub, and the cloud SDKs and gRPC under them. A
// package path matches an entry that is itself or a package below it.
var notInTheOperatorBinary = []string{
	"github.com/specsync/specsync/emulator", // the emulators, the local stack, emulatortest
	"github.com/specsync/specsync/functions",
	"github.com/specsync/specsync/pkg/bootstrap",
	"github.com/specsync/specsync/pkg/feed",
	"github.com/specsync/specsync/pkg/invariant",
	"github.com/specsync/specsync/pkg/osb",
	"github.com/specsync/specsync/pkg/queue",
	"github.com/specsync/specsync/pkg/reconcile",
	"github.com/specsync/specsync/pkg/store",
	"github.com/specsync/specsync/pkg/worker",
	"github.com/GoogleCloudPlatform/functions-framework-go",
	"github.com/cloudevents/sdk-go",
	"cloud.google.com/go/firestore",
	"cloud.google.com/go/pubsub",
	"google.golang.org/api",
	"google.golang.org/grpc",
	// Auth type google's credentials: `config check` validates the type
	// and its host in pkg/registry, and only the binaries that fetch
	// import the provider (pkg/registry/gcpauth) and Google's auth
	// library, metadata client and OAuth2 under it.
	"github.com/specsync/specsync/pkg/registry/gcpauth",
	"cloud.google.com/go/auth",
	"cloud.google.com/go/compute/metadata",
	"golang.org/x/oauth2",
}

// `go install .../cmd/specsync` builds the operator CLI alone: none of
// the packages above is among its dependencies.
func TestOperatorBinaryLinksNoCloudOrLocalStack(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != "github.com/specsync/specsync/cmd/specsync" {
		t.Fatalf("go list -deps listed no dependencies of cmd/specsync:\n%s", out)
	}
	for _, dep := range deps {
		for _, bad := range notInTheOperatorBinary {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("cmd/specsync depends on %s (matches %s)", dep, bad)
			}
		}
	}
}

// The registry client the operator binary links on purpose, and why: `specsync
// config check` validates a registries file exactly as a function's cold
// start would, by building each registry's source (pkg/config's build: the
// filters, the auth blocks, the OCI reference and the HTTP URL are checked
// by the constructors of pkg/registry), so that no file passes the check
// and fails the deploy. pkg/registry's OCI source imports
// go-containerregistry's remote (which brings mutate, tarball, ...) and
// authn (whose default keychain brings docker/cli's config): those come
// along. Splitting validation from construction would take the registry
// types and their checks out of pkg/registry and the construction out of
// pkg/config's Load, a change to the functions' cold start made for a
// smaller CLI; we keep one code path instead. The test pins that this is
// the only way they come in.
var linkedOnlyForConfigCheck = []string{
	"github.com/google/go-containerregistry",
	"github.com/docker/cli",
	"github.com/docker/docker-credential-helpers",
}

// The registry client comes in through pkg/registry alone, pkg/registry
// through pkg/config alone, and pkg/config through the config command
// alone (cli_config.go). If the client is gone, move these entries to
// notInTheOperatorBinary.
func TestOperatorBinaryLinksTheRegistryClientOnlyForConfigCheck(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	importers := map[string][]string{} // package -> the binary's packages importing it
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			importers[imp] = append(importers[imp], f[0])
		}
	}
	client := func(pkg string) bool {
		for _, p := range linkedOnlyForConfigCheck {
			if pkg == p || strings.HasPrefix(pkg, p+"/") {
				return true
			}
		}
		return false
	}
	const (
		registryPkg = "github.com/specsync/specsync/pkg/registry"
		configPkg   = "github.com/specsync/specsync/pkg/config"
	)
	linked, via := 0, map[string]bool{}
	for pkg, from := range importers {
		if !client(pkg) {
			continue
		}
		linked++
		for _, imp := range from {
			if !client(imp) {
				via[imp] = true
			}
		}
	}
	if linked == 0 {
		t.Fatal("cmd/specsync no longer links the registry client: move linkedOnlyForConfigCheck into notInTheOperatorBinary")
	}
	if len(via) != 1 || !via[registryPkg] {
		t.Errorf("the registry client comes in through %v, want %s alone", keys(via), registryPkg)
	}
	if got := importers[registryPkg]; len(got) != 1 || got[0] != configPkg {
		t.Errorf("pkg/registry is imported by %v, want pkg/config alone", got)
	}
	if got := importers[configPkg]; len(got) != 1 || got[0] != "github.com/specsync/specsync/cmd/specsync" {
		t.Errorf("pkg/config is imported by %v, want cmd/specsync alone", got)
	}
	// Within cmd/specsync, by the config command only.
	names, _ := filepath.Glob("*.go")
	var files []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if imp.Path.Value == strconv.Quote(configPkg) {
				files = append(files, name)
			}
		}
	}
	if len(files) != 1 || files[0] != "cli_config.go" {
		t.Errorf("pkg/config is imported by %v of cmd/specsync, want cli_config.go (specsync config check) alone", files)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The local tools moved to their own command; asking the operator CLI for
// one is a usage error (exit 2) that says where it went.
func TestLocalToolsSayWhereTheyWent(t *testing.T) {
	for args, want := range map[string]string{
		"run":             "specsync-local run",
		"demo":            "specsync-local demo",
		"local reconcile": "specsync-local reconcile",
		"local catalog":   "specsync-local catalog",
		"local":           "specsync-local",
		"reconcile":       "specsync-local reconcile",
	} {
		err := realMain(context.Background(), strings.Fields(args), io.Discard, io.Discard)
		var u usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), want) {
			t.Errorf("specsync %s: %v, want a usage error naming %q", args, err, want)
		}
	}
}

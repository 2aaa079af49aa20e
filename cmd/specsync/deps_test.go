package main

import (
	"context"
	"errors"
	"io"
	"os/exec"
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
	"github.com/GoogleCloudPlatform/functions-framework-go",
	"github.com/cloudevents/sdk-go",
	"cloud.google.com/go/firestore",
	"cloud.google.com/go/pubsub",
	"google.golang.org/api",
	"google.golang.org/grpc",
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

package stack

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/specsync/specsync/emulator"
)

// A stack that cannot start returns its error, not a panic: Start's
// deferred Close ran on the nil stack it returned, and the panic hid the
// error (seen as "stack exited before it was ready"). Closing a nil
// stack does nothing.
func TestStartFailureReturnsTheError(t *testing.T) {
	for _, env := range []string{emulator.FirestoreEnv, emulator.PubSubEnv} {
		if os.Getenv(env) == "" {
			t.Fatalf("%s is not set: run the tests with the emulators (make test)", env)
		}
	}
	// What Start would set for the process, set for this test only.
	for k, v := range map[string]string{
		"GOOGLE_CLOUD_PROJECT": "stack-start-failure", "SPECSYNC_TOPIC": "t", "SPECSYNC_CHANGES_TOPIC": "c",
		"SPECSYNC_COMMIT_TOPIC": "m", "SPECSYNC_ADMIN_TOKEN": "x", "SPECSYNC_BROKER_USERNAME": "u",
		"SPECSYNC_BROKER_PASSWORD": "p", "SPECSYNC_REGISTRIES": "r", "SPECSYNC_LOCAL_HOOK_SECRET": "h",
		"SPECSYNC_DEMO_REGISTRY": "d",
	} {
		t.Setenv(k, v)
	}
	var s *Stack
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Start panicked: %v", p)
			}
		}()
		s, err = Start(context.Background(), Options{RegistryAddr: "no such address"})
	}()
	if err == nil || s != nil {
		t.Fatalf("Start with a bad registry address: %v, %v", s, err)
	}
	if !strings.Contains(err.Error(), "no such address") {
		t.Errorf("the error does not say what failed: %v", err)
	}
	s.Close()
}

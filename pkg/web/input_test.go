package web_test

import (
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/web"
)

// CheckID is the one id rule: what it refuses, and that it names the
// field without repeating a long value whole.
func TestCheckID(t *testing.T) {
	for _, ok := range []string{"a", "i-1", "0b5a-x.y~z_", strings.Repeat("a", 255), "_x_", "__x", "x__", "...", "_"} {
		if err := web.CheckID("instance id", ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "__x__", "____", "a/b", "\xff", "é", strings.Repeat("a", 256), "a b"} {
		err := web.CheckID("plan_id", bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if !strings.HasPrefix(err.Error(), "plan_id ") || len(err.Error()) > 200 {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

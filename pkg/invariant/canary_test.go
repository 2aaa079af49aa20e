package invariant_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/invariant"
)

// Leaked finds a canary in the forms a secret takes on its way into a
// log, a message or an answer, and never names it whole.
func TestLeakedSeesEveryForm(t *testing.T) {
	const k = "canary-l3ak-9c2e"
	escaped := strings.ReplaceAll(strings.ReplaceAll(fmt.Sprintf("%q", k), "-", `\u002d`), "a", `\u0061`)
	cases := map[string]string{
		"as it is":         "GET https://robot:" + k + "@host/v2/: 401",
		"base64":           base64.StdEncoding.EncodeToString([]byte("robot:" + k)),
		"a Basic header":   `{"msg":"refused","auth":"` + base64.StdEncoding.EncodeToString([]byte("robot:"+k)) + `"}`,
		"escaped in a log": `{"msg":"start"}` + "\n" + `{"msg":"x","token":` + escaped + `}` + "\n" + `{"msg":"end"}`,
	}
	for name, text := range cases {
		got := invariant.Leaked(text, []string{k, "other-canary-unused"})
		if len(got) != 1 || strings.Contains(got[0], k) {
			t.Errorf("%s: Leaked = %q, want the canary found once, masked", name, got)
		}
	}
	if got := invariant.Leaked(`{"msg":"clean"}`+"\n"+base64.StdEncoding.EncodeToString([]byte("nothing here")), []string{k}); len(got) != 0 {
		t.Errorf("clean text: Leaked = %q, want nothing", got)
	}
}

package registry_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/specsync/specsync/pkg/registry"
)

// A registry that refuses a request and echoes its Authorization header
// in the error it answers (some do) gets no form of the credential into
// the fetch's error: neither the password nor the Basic encoding the
// request carried.
func TestOCIRefusalEchoingTheHeaderKeepsTheSecretOut(t *testing.T) {
	const password = "echo-pa55word-c4n4ry"
	s := newDistribution(t, map[string]string{"alice": password})
	s.pushSpec(t, "x/one", specYAML("one"))
	s.setFault(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("WWW-Authenticate", `Basic realm="echo"`)
		http.Error(w, "refused: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
		return true
	})
	t.Setenv("SPECSYNC_TEST_ECHO_PW", password)
	for _, cfg := range []registry.OCIConfig{
		{Auth: registry.Auth{Type: "basic", Username: "alice", PasswordEnv: "SPECSYNC_TEST_ECHO_PW"}},
		{Auth: registry.Auth{Type: "basic", Username: "alice", PasswordEnv: "SPECSYNC_TEST_ECHO_PW"}, Repositories: []string{"x/one"}},
	} {
		err := fetchFails(t, s.oci(t, cfg), "401")
		text := fmt.Sprintf("%v %+v %#v", err, err, err)
		for _, secret := range []string{password, base64.StdEncoding.EncodeToString([]byte("alice:" + password))} {
			if strings.Contains(text, secret) {
				t.Errorf("repositories %v: the error holds a form of the credential: %v", cfg.Repositories, err)
			}
		}
	}
}

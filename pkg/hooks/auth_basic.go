package hooks

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/specsync/specsync/pkg/web"
)

// verifyBasic checks a basic hook's request: HTTP Basic (RFC 7617) whose
// password is the secret, whatever the user name, compared as SHA-256
// digests in constant time like a bearer token. Quay, which sends no
// header of its own, sends this from a webhook URL's user information
// (https://specsync:SECRET@HOST/hooks/NAME).
func (v *verifier) verifyBasic(r *http.Request) error {
	scheme, credentials, err := web.Authorization(r)
	if err != nil {
		return errUnauthorized{err.Error()}
	}
	_, pass, ok := web.BasicCredentials(credentials)
	if !strings.EqualFold(scheme, "Basic") || !ok || pass == "" {
		return errUnauthorized{"the hook needs an Authorization: Basic header whose password is its secret (a webhook URL https://USER:SECRET@HOST/hooks/NAME sends one)"}
	}
	secret, usable := v.current()
	got, want := sha256.Sum256([]byte(pass)), sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 || !usable {
		return errUnauthorized{"the Basic password is not the hook's secret"}
	}
	return nil
}

// Package gcpauth gives auth type google its access tokens: the process's
// Application Default Credentials. In Cloud Functions they are the
// function's service account, through the metadata server; locally, the
// service account key file GOOGLE_APPLICATION_CREDENTIALS names, or the
// user credentials `gcloud auth application-default login` wrote.
//
// Importing the package registers it with pkg/registry (as importing
// image/png registers a decoder). The functions and specsync-local import
// it; the operator CLI does not, so that validating a registries file
// links no Google auth library and no metadata client.
//
// It is built on cloud.google.com/go/auth rather than
// golang.org/x/oauth2/google: there a key file's or gcloud's credentials
// come with a token cache of their own that refreshes 10 seconds before
// expiry whatever a wrapping oauth2.ReuseTokenSourceWithExpiry says (only
// the metadata server's honour an early refresh), and an oauth2
// TokenSource takes no context, so a token endpoint that hangs would
// outlive the fetch's deadline. cloud.google.com/go/auth caches once, with
// one early-refresh window for every kind of credentials, and takes the
// fetch's context for each token request.
package gcpauth

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"

	"github.com/specsync/specsync/pkg/registry"
)

// Scope is the OAuth scope the tokens are asked for: Artifact Registry,
// Container Registry and Cloud Storage all accept cloud-platform, and the
// service account's roles say what it may actually read.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// DefaultEarlyRefresh is how long before its expiry a token is replaced.
// A fetch takes its token when it starts, so the window must outlast a
// whole fetch (60 seconds by default); it must also stay under the 4
// minutes before expiry at which the metadata server starts handing out a
// new token, or a refresh would get the old one back. Google's own client
// libraries use the same window for that reason.
const DefaultEarlyRefresh = 3*time.Minute + 45*time.Second

// earlyRefresh is DefaultEarlyRefresh; tests shorten it (export_test.go).
var earlyRefresh = DefaultEarlyRefresh

func init() { registry.RegisterGoogleCredentials(Find) }

// Find finds the Application Default Credentials. Each call makes a new
// token source, with its own cache: pkg/registry calls it once per
// source.
func Find() (registry.GoogleTokenSource, error) {
	creds, err := credentials.DetectDefault(&credentials.DetectOptions{
		Scopes:            []string{Scope},
		EarlyTokenRefresh: earlyRefresh,
		// Refresh in the fetch that needs the token, under its deadline,
		// not in a goroutine that a function instance between requests
		// may never run.
		DisableAsyncRefresh: true,
	})
	if err != nil {
		return nil, fmt.Errorf("no Application Default Credentials: deployed, the function's service account provides them; "+
			"locally, set GOOGLE_APPLICATION_CREDENTIALS to a service account key file or run "+
			"`gcloud auth application-default login`: %w", err)
	}
	return tokens{creds}, nil
}

type tokens struct{ creds *auth.Credentials }

// Token returns the cached token while it has more than the early-refresh
// window to live, else a new one.
func (t tokens) Token(ctx context.Context) (string, error) {
	tok, err := t.creds.Token(ctx)
	if err != nil {
		return "", err
	}
	return tok.Value, nil
}

package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
)

// AuthGoogle is the auth type whose credentials are the Application
// Default Credentials of the process: in Cloud Functions the function's
// own service account (through the metadata server), locally the key file
// GOOGLE_APPLICATION_CREDENTIALS names or gcloud's application default
// login. No secret is configured at all.
const AuthGoogle = "google"

// googleUser is the user name Container Registry and Artifact Registry
// take with an OAuth2 access token as the password, in the Docker token
// exchange at their token realm.
const googleUser = "oauth2accesstoken"

// GoogleTokenSource hands out access tokens of one set of credentials.
type GoogleTokenSource interface {
	// Token returns an access token that stays valid for the length of a
	// fetch: the source reuses a token while it is, and fetches a new one
	// before it expires. The error never holds a token.
	Token(ctx context.Context) (string, error)
}

// GoogleCredentials finds the Application Default Credentials and returns
// a source of access tokens for them, or an error that says how to
// provide them.
type GoogleCredentials func() (GoogleTokenSource, error)

// googleCredentials is the registered GoogleCredentials. pkg/registry does
// not find credentials itself: Google's auth library and the metadata
// client would come with it into every binary that validates a registries
// file (the operator CLI among them), so the binaries that fetch register
// it instead (package gcpauth, imported by the functions and the local
// tools).
var googleCredentials struct {
	sync.Mutex
	find GoogleCredentials
}

// RegisterGoogleCredentials makes auth type google find its credentials
// with find. Package gcpauth registers Application Default Credentials
// when imported.
func RegisterGoogleCredentials(find GoogleCredentials) {
	googleCredentials.Lock()
	defer googleCredentials.Unlock()
	googleCredentials.find = find
}

// errNoGoogleCredentials is the fetch error of a binary that registered no
// GoogleCredentials.
var errNoGoogleCredentials = errors.New("auth type google: this program has no way to find Google credentials " +
	"(the functions and specsync-local register Application Default Credentials by importing " +
	"github.com/specsync/specsync/pkg/registry/gcpauth)")

// googleTokens is one source's way to its access tokens. The token source
// is made at the first fetch that needs it, not when the registries file
// loads: credentials that are missing fail that fetch (recorded in the
// registry's status), never a cold start, and a later fetch finds them
// once they are provided. Once made, it is kept, so its tokens are reused
// while they are valid.
type googleTokens struct {
	mu  sync.Mutex
	src GoogleTokenSource
}

// token returns an access token for one fetch.
func (g *googleTokens) token(ctx context.Context) (string, error) {
	g.mu.Lock()
	src := g.src
	if src == nil {
		googleCredentials.Lock()
		find := googleCredentials.find
		googleCredentials.Unlock()
		if find == nil {
			g.mu.Unlock()
			return "", errNoGoogleCredentials
		}
		var err error
		if src, err = find(); err != nil {
			g.mu.Unlock()
			return "", fmt.Errorf("auth type google: %w", err)
		}
		g.src = src
	}
	g.mu.Unlock()
	tok, err := src.Token(ctx)
	if err != nil {
		return "", fmt.Errorf("auth type google: access token: %w", err)
	}
	if tok == "" {
		return "", errors.New("auth type google: the credentials gave an empty access token")
	}
	return tok, nil
}

// googleRegistryHost reports whether host (host[:port]) is one of Google's
// container registries: Container Registry (gcr.io and its regional
// hosts) or Artifact Registry (LOCATION-docker.pkg.dev), on the HTTPS
// port.
func googleRegistryHost(host string) bool {
	name, ok := httpsHostname(host)
	return ok && (name == "gcr.io" || strings.HasSuffix(name, ".gcr.io") || strings.HasSuffix(name, ".pkg.dev"))
}

// googleStorageHost reports whether host is Cloud Storage's API host, the
// one HTTP host a Google token may go to (an index document in a bucket).
func googleStorageHost(host string) bool {
	name, ok := httpsHostname(host)
	return ok && name == "storage.googleapis.com"
}

// httpsHostname is host's name, lowercased, if host has no port or the
// HTTPS one.
func httpsHostname(host string) (string, bool) {
	name, port := host, ""
	if h, p, err := net.SplitHostPort(host); err == nil {
		name, port = h, p
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	return name, name != "" && (port == "" || port == "443")
}

// googleOnly refuses to send any request that carries credentials to a
// host that is not Google's, or over plain HTTP. The load-time check of
// the configured host cannot cover what the registry itself names: the
// token realm of its 401, a redirect. go-containerregistry sends the basic
// credentials (the access token) to whatever realm the registry names, so
// this is where a Google token is kept from going anywhere else.
type googleOnly struct {
	inner http.RoundTripper
	allow func(host string) bool
	hosts string // the allowed hosts, for the message
}

func (g googleOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") != "" && (r.URL.Scheme != "https" || !g.allow(r.URL.Host)) {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("auth type google: refusing to send Google credentials to %s://%s (only to %s, over HTTPS)",
			r.URL.Scheme, r.URL.Host, g.hosts)
	}
	return g.inner.RoundTrip(r)
}

// checkGoogleOCI checks that a source with auth type google talks to a
// Google registry over HTTPS, and guards its transport (transport, set):
// the oci source and Helm's OCI form, whose block (oci, helm) the messages
// name with its fields, so that `specsync config check` reports them at
// their line.
func checkGoogleOCI(block string, auth Auth, host string, insecure bool, transport *http.RoundTripper) (*googleTokens, error) {
	if auth.kind() != AuthGoogle {
		return nil, nil
	}
	switch {
	case !googleRegistryHost(host):
		return nil, fieldErrorf(block, "host %q is not one of Google's registries (gcr.io, *.gcr.io, *.pkg.dev, over HTTPS), "+
			"the only ones auth type google sends Google access tokens to", host)
	case insecure:
		return nil, fieldErrorf(block, "insecure: auth type google never sends a Google access token over plain HTTP; remove %s.insecure", block)
	}
	*transport = googleOnly{inner: *transport, allow: googleRegistryHost, hosts: "gcr.io, *.gcr.io, *.pkg.dev"}
	return &googleTokens{}, nil
}

// checkGoogleStorage checks that a source reading a document over HTTP
// (an http index, a Helm chart repository) with auth type google reads it
// from Cloud Storage over HTTPS, and guards its client (a redirect to
// plain HTTP, or a chart URL on another host, would otherwise carry the
// token). block is the source's block, whose url field the message
// names, so that `specsync config check` reports it at its line.
func checkGoogleStorage(block string, auth Auth, rawURL, scheme, host string, client **http.Client) (*googleTokens, error) {
	if auth.kind() != AuthGoogle {
		return nil, nil
	}
	if scheme != "https" || !googleStorageHost(host) {
		return nil, fieldErrorf(block, "url %q is not in Cloud Storage (https://storage.googleapis.com), "+
			"the only place auth type google sends Google access tokens to", rawURL)
	}
	c := http.Client{}
	if *client != nil {
		c = **client
	}
	inner := c.Transport
	if inner == nil {
		inner = http.DefaultTransport
	}
	c.Transport = googleOnly{inner: inner, allow: googleStorageHost, hosts: "storage.googleapis.com"}
	*client = &c
	return &googleTokens{}, nil
}

// ociCredentials reads the credentials of one OCI fetch: the configured
// secrets, or for auth type google (google, the source's token source) an
// access token, which go-containerregistry trades for a registry token at
// the registry's realm as basic credentials (user oauth2accesstoken), the
// exchange Container Registry and Artifact Registry document. The token is
// asked of the token source at every fetch, so a refreshed one is used.
func ociCredentials(ctx context.Context, auth Auth, google *googleTokens) (authn.AuthConfig, error) {
	if google == nil {
		return auth.resolve()
	}
	tok, err := google.token(ctx)
	if err != nil {
		return authn.AuthConfig{}, err
	}
	return authn.AuthConfig{Username: googleUser, Password: tok}, nil
}

// storageAuthorization is the Authorization header of one fetch of a
// document over HTTP and the secrets to keep out of its errors: the
// configured credentials, or for auth type google (google, the source's
// token source) the access token as a bearer token, as Cloud Storage's
// API takes it.
func storageAuthorization(ctx context.Context, auth Auth, google *googleTokens) (string, []string, error) {
	if google == nil {
		return auth.authorization()
	}
	tok, err := google.token(ctx)
	if err != nil {
		return "", nil, err
	}
	return "Bearer " + tok, []string{tok}, nil
}

package main

// The HTTP client of the operator commands: where the functions are, the
// credentials (from the environment only, never flags, so they stay out of
// shell history and process lists), and how answers become exit codes.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/logging"
)

// DefaultURL is the local stack's (`specsync-local run`, `make run`).
const DefaultURL = "http://127.0.0.1:8080"

// clientFlags are the flags every operator command takes.
type clientFlags struct {
	url, bootstrapURL, catalogURL string
	output                        string
	timeout                       time.Duration
	logLevel                      string
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "url", envOr("SPECSYNC_URL", DefaultURL), "base URL of both functions, e.g. the local stack (env SPECSYNC_URL)")
	fs.StringVar(&c.bootstrapURL, "bootstrap-url", os.Getenv("SPECSYNC_BOOTSTRAP_URL"), "base URL of the bootstrap function (env SPECSYNC_BOOTSTRAP_URL; default --url)")
	fs.StringVar(&c.catalogURL, "catalog-url", os.Getenv("SPECSYNC_CATALOG_URL"), "base URL of the catalog function (env SPECSYNC_CATALOG_URL; default --url)")
	fs.StringVar(&c.output, "output", envOr("SPECSYNC_OUTPUT", "table"), "output format: table or json (env SPECSYNC_OUTPUT)")
	fs.StringVar(&c.output, "o", envOr("SPECSYNC_OUTPUT", "table"), "shorthand for --output")
	fs.DurationVar(&c.timeout, "timeout", 60*time.Second, "timeout of each HTTP request")
	fs.StringVar(&c.logLevel, "log-level", envOr("LOG_LEVEL", "warn"), "level of the JSON logs on stderr (env LOG_LEVEL)")
}

func (c *clientFlags) json() bool { return c.output == "json" }

func (c *clientFlags) check() error {
	if c.output != "table" && c.output != "json" {
		return usageError{fmt.Sprintf("--output %q: want table or json", c.output)}
	}
	for _, u := range []string{c.url, c.bootstrapURL, c.catalogURL} {
		if u == "" {
			continue
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return usageError{fmt.Sprintf("%q is not an http(s) URL", u)}
		}
	}
	return nil
}

// client is a client of the bootstrap and catalog functions.
type client struct {
	bootstrap, catalog string
	http               *http.Client
	log                *slog.Logger
	// identityToken is the operator's Google identity token
	// (SPECSYNC_IDENTITY_TOKEN), for Cloud Run's IAM check of a function
	// that only some identities may invoke (the bootstrap, in Google
	// Cloud); empty, none is sent.
	identityToken string
}

// IdentityTokenEnv holds a Google identity token (`gcloud auth
// print-identity-token`) that every request carries in
// X-Serverless-Authorization: what Cloud Run's IAM check reads when
// Authorization carries the application's own credential (the admin
// token, the broker's basic auth), which Cloud Run then passes on
// untouched. Like every credential of the CLI it comes from the
// environment only, never a flag.
const IdentityTokenEnv = "SPECSYNC_IDENTITY_TOKEN"

func (c *clientFlags) client(stderr io.Writer) *client {
	base := strings.TrimRight(c.url, "/")
	a := &client{bootstrap: base, catalog: base, http: &http.Client{Timeout: c.timeout}, log: logging.New(stderr, c.logLevel),
		identityToken: strings.TrimSpace(os.Getenv(IdentityTokenEnv))}
	if c.bootstrapURL != "" {
		a.bootstrap = strings.TrimRight(c.bootstrapURL, "/")
	}
	if c.catalogURL != "" {
		a.catalog = strings.TrimRight(c.catalogURL, "/")
	}
	return a
}

type authKind int

const (
	authAdmin authKind = iota
	authBroker
)

func adminToken() (string, error) {
	if t := os.Getenv("SPECSYNC_ADMIN_TOKEN"); t != "" {
		return t, nil
	}
	if f := os.Getenv("SPECSYNC_ADMIN_TOKEN_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", withExit(ExitAuth, "SPECSYNC_ADMIN_TOKEN_FILE: %v", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", withExit(ExitAuth, "SPECSYNC_ADMIN_TOKEN_FILE %s is empty", f)
	}
	return "", withExit(ExitAuth, "no admin credential: set SPECSYNC_ADMIN_TOKEN (or SPECSYNC_ADMIN_TOKEN_FILE)")
}

// answer is a response read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request and returns the answer; statuses in ok are returned
// as is, anything else becomes an error with the right exit code.
func (a *client) do(ctx context.Context, method, rawURL string, auth authKind, ok ...int) (*answer, error) {
	return a.doWith(ctx, method, rawURL, auth, nil, ok...)
}

// doWith is do with extra request headers.
func (a *client) doWith(ctx context.Context, method, rawURL string, auth authKind, header http.Header, ok ...int) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, rawURL, nil)
	if err != nil {
		return nil, withExit(ExitUsage, "%s %s: %v", method, rawURL, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	switch auth {
	case authAdmin:
		tok, err := adminToken()
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	case authBroker:
		user, pass := os.Getenv("SPECSYNC_BROKER_USERNAME"), os.Getenv("SPECSYNC_BROKER_PASSWORD")
		if user == "" || pass == "" {
			return nil, withExit(ExitAuth, "no broker credentials: set SPECSYNC_BROKER_USERNAME and SPECSYNC_BROKER_PASSWORD")
		}
		req.SetBasicAuth(user, pass)
		req.Header.Set("X-Broker-API-Version", "2.17")
	}
	if a.identityToken != "" {
		req.Header.Set("X-Serverless-Authorization", "Bearer "+a.identityToken)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "specsync-cli")
	start := time.Now()
	resp, err := a.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		a.log.Warn("request failed", "method", method, "url", rawURL, "error", err)
		return nil, withExit(ExitAPI, "%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, withExit(ExitAPI, "%s %s: reading the answer: %v", method, rawURL, err)
	}
	a.log.Debug("request", "method", method, "url", rawURL, "status", resp.StatusCode, "duration_ms", time.Since(start).Milliseconds())
	ans := &answer{status: resp.StatusCode, header: resp.Header, body: body}
	for _, s := range ok {
		if resp.StatusCode == s {
			return ans, nil
		}
	}
	desc := strings.TrimSpace(string(body))
	var e api.ErrorBody // every endpoint answers errors with it
	if json.Unmarshal(body, &e) == nil && e.Description != "" {
		desc = e.Description
	}
	if len(desc) > 500 {
		desc = desc[:500] + "..."
	}
	code := ExitAPI
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		code = ExitAuth
	}
	return ans, withExit(code, "%s %s: %s: %s", method, redact(rawURL), resp.Status, desc)
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.User = nil
	return p.String()
}

func (a *answer) decode(v any) error {
	if err := json.Unmarshal(a.body, v); err != nil {
		return withExit(ExitAPI, "the answer (%d) is not the JSON expected: %v", a.status, err)
	}
	return nil
}

// printJSON writes a raw JSON body indented, one document.
func printJSON(w io.Writer, body []byte) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return withExit(ExitAPI, "the answer is not JSON: %v", err)
	}
	return writeJSON(w, v)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseArgs parses flags that may come before, between or after the
// positional arguments, and returns the positional ones.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				var b strings.Builder
				fs.SetOutput(&b)
				fs.PrintDefaults()
				return nil, usageError{"flags of " + fs.Name() + ":\n" + b.String()}
			}
			return nil, usageError{fmt.Sprintf("%s: %v", fs.Name(), err)}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// noArgs parses flags and refuses positional arguments.
func noArgs(fs *flag.FlagSet, args []string) error {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Sprintf("%s: unexpected arguments %v", fs.Name(), pos)}
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device), which
// is when progress is drawn as a bar instead of plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

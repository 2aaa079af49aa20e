package registry

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/specsync/specsync/pkg/spec"
)

// Git defaults.
const (
	DefaultGitTimeout = 60 * time.Second
	// DefaultGitMaxBytes bounds the pack of one commit (its whole tree):
	// it is held in memory.
	DefaultGitMaxBytes = 64 << 20
	// GitTokenUser is the user name sent with a token by default: what
	// GitHub expects with an installation token; GitHub's personal access
	// tokens and GitLab's tokens take any user name.
	GitTokenUser = "x-access-token"
	// AuthGitHubApp is the git auth type that trades a GitHub App's
	// private key for an installation token.
	AuthGitHubApp = "github_app"
	// gitAppTokenMargin is how long before its expiry a cached
	// installation token is replaced (GitHub issues them for an hour).
	gitAppTokenMargin = 5 * time.Minute
)

// gitReadVersion names how this code reads a blob into an entry (the
// spec's parsing, validation and digest). It is part of every git entry's
// Upstream and of the listing's ETag, so a release that reads a file
// differently reads every file again. Change it whenever the same bytes
// would give a different entry.
const gitReadVersion = "1"

// GitAuth says how a Git repository is read over HTTPS. Like Auth it names
// secrets (a variable or a file), never holds them.
//
// Types:
//   - "anonymous" (or empty): a public repository.
//   - "token": HTTP Basic with Username (default x-access-token) and the
//     token (TokenEnv or TokenFile) as the password: a GitHub personal
//     access token or installation token, a GitLab access token.
//   - "github_app": a GitHub App's installation token, asked for at
//     APIURL (POST /app/installations/{InstallationID}/access_tokens)
//     with a JWT signed by the app's private key (PrivateKeyEnv or
//     PrivateKeyFile, PEM), and kept until five minutes before it
//     expires.
type GitAuth struct {
	Type           string `json:"type,omitempty"`
	Username       string `json:"username,omitempty"`
	TokenEnv       string `json:"token_env,omitempty"`
	TokenFile      string `json:"token_file,omitempty"`
	AppID          int64  `json:"app_id,omitempty"`
	InstallationID int64  `json:"installation_id,omitempty"`
	PrivateKeyEnv  string `json:"private_key_env,omitempty"`
	PrivateKeyFile string `json:"private_key_file,omitempty"`
	// APIURL is GitHub's REST API (default https://api.github.com; GitHub
	// Enterprise Server: https://HOST/api/v3).
	APIURL string `json:"api_url,omitempty"`
}

func (a GitAuth) kind() string {
	if a.Type == "" {
		return AuthAnonymous
	}
	return a.Type
}

// problems are what is wrong with the auth block, each naming its field.
func (a GitAuth) problems() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("git.auth."+format, args...)) }
	set := func(pairs ...any) []string {
		var out []string
		for i := 0; i < len(pairs); i += 2 {
			switch v := pairs[i+1].(type) {
			case string:
				if v != "" {
					out = append(out, pairs[i].(string))
				}
			case int64:
				if v != 0 {
					out = append(out, pairs[i].(string))
				}
			}
		}
		return out
	}
	token := set("token_env", a.TokenEnv, "token_file", a.TokenFile)
	key := set("private_key_env", a.PrivateKeyEnv, "private_key_file", a.PrivateKeyFile)
	app := set("app_id", a.AppID, "installation_id", a.InstallationID, "api_url", a.APIURL)
	one := func(field string, got []string) {
		switch len(got) {
		case 0:
			bad("%s is required for auth type %s", field, a.kind())
		case 1:
		default:
			errs = append(errs, fmt.Errorf("git.auth: set only one of %s", strings.Join(got, ", ")))
		}
	}
	unused := func(fields ...string) {
		if len(fields) > 0 {
			bad("%s: auth type %s does not use it", strings.Join(fields, ", "), a.kind())
		}
	}
	switch a.kind() {
	case AuthAnonymous:
		unused(slices.Concat(token, key, app, set("username", a.Username))...)
	case AuthToken:
		one("token_env or token_file", token)
		unused(slices.Concat(key, app)...)
	case AuthGitHubApp:
		one("private_key_env or private_key_file", key)
		if a.AppID <= 0 {
			bad("app_id is required for auth type github_app: the app's id (a positive number)")
		}
		if a.InstallationID <= 0 {
			bad("installation_id is required for auth type github_app: the installation's id (a positive number)")
		}
		if a.APIURL != "" {
			if err := httpsURL(a.APIURL); err != nil {
				bad("api_url: %v", err)
			}
		}
		unused(slices.Concat(token, set("username", a.Username))...)
	default:
		bad("type %q is not one of anonymous, token, github_app", a.Type)
	}
	for _, f := range []struct{ name, v string }{{"token_env", a.TokenEnv}, {"private_key_env", a.PrivateKeyEnv}} {
		if f.v != "" && !envVarName(f.v) {
			bad("%s %q is not an environment variable name", f.name, f.v)
		}
	}
	return errs
}

// String says where the credentials come from, never what they are.
func (a GitAuth) String() string {
	from := func(env, file string) string {
		if env != "" {
			return "from env " + env
		}
		return "from file " + file
	}
	switch a.kind() {
	case AuthToken:
		return "token(" + from(a.TokenEnv, a.TokenFile) + ")"
	case AuthGitHubApp:
		return fmt.Sprintf("github_app(app %d, installation %d, key %s)", a.AppID, a.InstallationID, from(a.PrivateKeyEnv, a.PrivateKeyFile))
	}
	return a.kind()
}

// GitConfig configures the spec files of a Git repository at a branch or
// tag.
type GitConfig struct {
	// URL is the repository's HTTPS URL, as `git clone` takes it.
	URL string
	// Ref is a branch or tag ("main", "v1.2"), or a full ref name
	// ("refs/heads/main", "refs/tags/v1.2").
	Ref string
	// Paths are globs of the files that are specs, relative to the
	// repository's root, matched as path.Match matches them, where a
	// part "**" also stands for any number of directories
	// ("specs/*.yaml", "services/**/spec.yaml"). Only *.yaml, *.yml and
	// *.json files are read; an entry is named after its path without
	// the extension ("specs/db").
	Paths  []string
	Filter *Filter
	Auth   GitAuth
	// Timeout bounds the whole fetch (default 60s); MaxBytes the pack of
	// the commit (default 64 MiB), a bigger one is a fetch error.
	Timeout  time.Duration
	MaxBytes int64
	// Transport replaces http.DefaultTransport for the repository and
	// GitHub's API (tests).
	Transport http.RoundTripper
}

// Git lists the spec files of a Git repository at a ref, read over Git's
// smart HTTP protocol with go-git, in memory: no git binary, no disk.
//
// A fetch first asks for the repository's refs (one request, `git
// ls-remote`'s). The ETag of a listing is the commit the ref named, with
// what selects the files (paths, allow, deny) and gitReadVersion: the
// same ETag is the same listing, so a run whose recorded ETag is the
// ref's now ends there, NotModified. Otherwise it fetches that commit
// alone (a second request: depth 1, only the commit's tree) and reads
// the files whose blob moved: an entry's Upstream is its blob id, so an
// entry the run's hint (FetchOptions.Hints) names at the same blob is
// given back from the hint, unread.
//
// The fetch wants exactly the commit the refs named. A ref that moved
// meanwhile (a push, a force-push) leaves that commit no longer a tip,
// which the server refuses: the fetch fails whole, marks nothing, and the
// next run reads the new commit. A force-push is otherwise an ordinary
// change: the source reads what the ref names now, whatever its history,
// so a file the rewrite dropped is gone like any removed file (marked,
// then deleted once no instance uses it), as an OCI tag moved to another
// image is. A missing ref, a repository gone or refused (404, 401, 403),
// an empty repository, a pack over MaxBytes or one that does not decode
// fails the fetch whole.
type Git struct {
	cfg    GitConfig
	ref    string // cfg.Ref as the refs name it, or its short form
	client transport.Transport
	http   *http.Client
	// selection fingerprints what selects the files, for the ETag.
	selection string

	tokenMu      sync.Mutex
	appToken     string
	appExpiresAt time.Time
}

// NewGit checks cfg and fills in defaults. Its error lists every
// problem, each naming its field of the git block.
func NewGit(cfg GitConfig) (*Git, error) {
	var errs []error
	if cfg.URL == "" {
		errs = append(errs, errors.New("git.url is required: the repository's https URL"))
	} else if err := httpsURL(cfg.URL); err != nil {
		errs = append(errs, fmt.Errorf("git.url: %w", err))
	}
	if err := checkRefName(cfg.Ref); err != nil {
		errs = append(errs, fmt.Errorf("git.ref: %w", err))
	}
	if len(cfg.Paths) == 0 {
		errs = append(errs, errors.New("git.paths is required: globs of the spec files (\"specs/*.yaml\")"))
	}
	for i, p := range cfg.Paths {
		if err := checkGlob(p); err != nil {
			errs = append(errs, fmt.Errorf("git.paths[%d] %q: %w", i, p, err))
		}
	}
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("git.timeout %s must not be negative", cfg.Timeout))
	}
	if cfg.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("git.max_bytes %d must not be negative", cfg.MaxBytes))
	}
	errs = append(errs, cfg.Auth.problems()...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultGitTimeout
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultGitMaxBytes
	}
	if cfg.Auth.kind() == AuthToken && cfg.Auth.Username == "" {
		cfg.Auth.Username = GitTokenUser
	}
	if cfg.Auth.kind() == AuthGitHubApp && cfg.Auth.APIURL == "" {
		cfg.Auth.APIURL = DefaultGHCRAPI
	}
	rt := cfg.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc := &http.Client{Transport: wholeGets{rt}}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%q\x00%s", gitReadVersion, cfg.Ref, cfg.Paths, cfg.Filter.fingerprint())
	return &Git{cfg: cfg, ref: strings.TrimPrefix(cfg.Ref, "/"), client: githttp.NewClient(hc), http: hc,
		selection: hex.EncodeToString(h.Sum(nil))[:16]}, nil
}

// String names the source for logs; it shows no credential.
func (g *Git) String() string {
	return "git " + g.cfg.URL + "@" + g.cfg.Ref + " (auth " + g.cfg.Auth.String() + ")"
}

// gitFile is a file of the commit that the source selects.
type gitFile struct {
	path, entry string
	blob        plumbing.Hash
}

// gitCommit is what one fetch learned of the repository.
type gitCommit struct {
	session transport.UploadPackSession
	adv     *packp.AdvRefs
	// hash is the commit the ref names (an annotated tag peeled).
	hash    plumbing.Hash
	secrets []string
	where   string
}

// Fetch lists the repository's spec files at the ref. See Source.
func (g *Git) Fetch(ctx context.Context, opts FetchOptions) (*Listing, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	c, err := g.lookUp(ctx)
	if err != nil {
		return nil, err
	}
	etag := "git" + gitReadVersion + ":" + c.hash.String() + ":" + g.selection
	if opts.ETag == etag && opts.PreviousDigest != "" {
		return &Listing{Entries: []Entry{}, Digest: opts.PreviousDigest, ETag: etag, NotModified: true}, nil
	}
	files, sto, err := g.files(ctx, c)
	if err != nil {
		return nil, err
	}
	entries, err := g.read(ctx, c, sto, files, opts)
	if err != nil {
		return nil, err
	}
	return &Listing{Entries: entries, Digest: ListingDigest(entries), ETag: etag}, nil
}

// FetchEntries fetches the commit the ref names and reads the named
// entries only. A name no file of the commit stands for is gone; a name
// the source does not select is in Listing.Refused. See EntryFetcher.
func (g *Git) FetchEntries(ctx context.Context, names []string, opts FetchOptions) (*Listing, error) {
	var selected, refused []string
	for _, n := range names {
		switch {
		case slices.Contains(selected, n) || slices.Contains(refused, n):
		case g.SelectsEntry(n):
			selected = append(selected, n)
		default:
			refused = append(refused, n)
		}
	}
	if len(selected) == 0 {
		return &Listing{Entries: []Entry{}, Digest: ListingDigest(nil), Refused: refused}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	c, err := g.lookUp(ctx)
	if err != nil {
		return nil, err
	}
	files, sto, err := g.files(ctx, c)
	if err != nil {
		return nil, err
	}
	files = slices.DeleteFunc(files, func(f gitFile) bool { return !slices.Contains(selected, f.entry) })
	entries, err := g.read(ctx, c, sto, files, FetchOptions{Hints: opts.Hints})
	if err != nil {
		return nil, err
	}
	return &Listing{Entries: entries, Digest: ListingDigest(entries), Refused: refused}, nil
}

// SelectsEntry reports whether some file the source would read stands
// for entry (its path without the extension matches a glob) and the
// filter allows it. It asks nothing upstream. See EntrySelector.
func (g *Git) SelectsEntry(entry string) bool {
	if entry == "" || path.Clean(entry) != entry || strings.HasPrefix(entry, "/") || entry == ".." || strings.HasPrefix(entry, "../") {
		return false
	}
	for ext := range specExtensions {
		if g.selects(entry + ext) {
			return g.cfg.Filter.Allows(entry)
		}
	}
	return false
}

// selects reports whether a path of the repository is one the globs name
// and a spec file by its extension.
func (g *Git) selects(p string) bool {
	if !specExtensions[strings.ToLower(path.Ext(p))] {
		return false
	}
	return slices.ContainsFunc(g.cfg.Paths, func(glob string) bool { return matchGlob(glob, p) })
}

// entryOf is the entry name of a spec file's path.
func entryOf(p string) string { return strings.TrimSuffix(p, path.Ext(p)) }

// lookUp reads the credentials and the repository's refs, and finds the
// commit the ref names: one request (plus, for a GitHub App without a
// fresh token, one to GitHub's API).
func (g *Git) lookUp(ctx context.Context) (*gitCommit, error) {
	c := &gitCommit{where: "repository " + g.cfg.URL}
	auth, secrets, err := g.auth(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: credentials: %w", c.where, err)
	}
	c.secrets = secrets
	ep, err := transport.NewEndpoint(g.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where, err)
	}
	if c.session, err = g.client.NewUploadPackSession(ep, auth); err != nil {
		return nil, g.fail(ctx, c, err)
	}
	if c.adv, err = c.session.AdvertisedReferencesContext(ctx); err != nil {
		// The answer was read whole (wholeGets): an error that is no
		// transport's and no status is the advertisement's decoding.
		var ue *url.Error
		if code, _ := Status(err); code == 0 && !errors.As(err, &ue) && !errors.Is(err, transport.ErrEmptyRemoteRepository) && ctx.Err() == nil {
			err = malformed(fmt.Errorf("not a Git refs advertisement: %w", err))
		}
		return nil, g.fail(ctx, c, err)
	}
	name, hash, err := g.resolveRef(c.adv)
	if err != nil {
		return nil, g.fail(ctx, c, err)
	}
	c.hash = hash
	c.where += " at " + name + " " + hash.String()[:12]
	return c, nil
}

// resolveRef finds the configured ref among the advertised ones: a full
// name exactly, a short one as a branch or a tag (both: ambiguous). An
// annotated tag names the commit it peels to.
func (g *Git) resolveRef(adv *packp.AdvRefs) (string, plumbing.Hash, error) {
	candidates := []string{g.ref}
	if !strings.HasPrefix(g.ref, "refs/") {
		candidates = []string{"refs/heads/" + g.ref, "refs/tags/" + g.ref}
	}
	var found []string
	for _, n := range candidates {
		if _, ok := adv.References[n]; ok {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return "", plumbing.ZeroHash, fmt.Errorf("no ref %s: the repository has no such branch or tag (%d refs advertised)", g.cfg.Ref, len(adv.References))
	case 2:
		return "", plumbing.ZeroHash, fmt.Errorf("ref %s is both a branch and a tag: name it refs/heads/%s or refs/tags/%s", g.cfg.Ref, g.cfg.Ref, g.cfg.Ref)
	}
	n := found[0]
	if peeled, ok := adv.Peeled[n]; ok {
		return n, peeled, nil
	}
	return n, adv.References[n], nil
}

// files fetches the commit (depth 1, in memory) and lists the files of
// its tree the source selects, by path.
func (g *Git) files(ctx context.Context, c *gitCommit) ([]gitFile, *memory.Storage, error) {
	req := packp.NewUploadPackRequestFromCapabilities(c.adv.Capabilities)
	req.Wants = []plumbing.Hash{c.hash}
	req.Depth = packp.DepthCommits(1)
	if err := req.Capabilities.Set(capability.Shallow); err != nil {
		return nil, nil, g.fail(ctx, c, err)
	}
	if c.adv.Capabilities.Supports(capability.NoProgress) {
		_ = req.Capabilities.Set(capability.NoProgress)
	}
	resp, err := c.session.UploadPack(ctx, req)
	if err != nil {
		return nil, nil, g.fail(ctx, c, fmt.Errorf("fetching the commit (refused if the ref moved since it was looked up: the next run reads it): %w", err))
	}
	defer resp.Close()
	var pack io.Reader = &boundedReader{r: resp, left: g.cfg.MaxBytes, limit: g.cfg.MaxBytes}
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		pack = sideband.NewDemuxer(sideband.Sideband64k, pack)
	case req.Capabilities.Supports(capability.Sideband):
		pack = sideband.NewDemuxer(sideband.Sideband, pack)
	}
	sto := memory.NewStorage()
	if err := packfile.UpdateObjectStorage(sto, pack); err != nil {
		if !errors.Is(err, errPackTooBig) && ctx.Err() == nil {
			err = malformed(err)
		}
		return nil, nil, g.fail(ctx, c, fmt.Errorf("reading the commit's pack: %w", err))
	}
	commit, err := object.GetCommit(sto, c.hash)
	if err != nil {
		return nil, nil, g.fail(ctx, c, fmt.Errorf("the pack does not hold the commit: %w", err))
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, nil, g.fail(ctx, c, fmt.Errorf("the commit's tree: %w", err))
	}
	var files []gitFile
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		p, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, g.fail(ctx, c, fmt.Errorf("walking the commit's tree: %w", err))
		}
		// Only regular files: a symlink's blob is its target's path, a
		// submodule's entry a commit of another repository.
		if (e.Mode == filemode.Regular || e.Mode == filemode.Executable) && g.selects(p) {
			files = append(files, gitFile{path: p, entry: entryOf(p), blob: e.Hash})
		}
	}
	slices.SortFunc(files, func(a, b gitFile) int { return strings.Compare(a.path, b.path) })
	return files, sto, nil
}

// read makes the files' entries: each from the run's hint of the entry
// at the same blob, or parsed. A file whose entry name another file took
// first ("db.yaml" and "db.json") is that entry's error.
func (g *Git) read(ctx context.Context, c *gitCommit, sto *memory.Storage, files []gitFile, opts FetchOptions) ([]Entry, error) {
	var hints map[string]Hint
	if opts.Hints != nil && len(files) > 0 {
		var err error
		if hints, err = opts.Hints(ctx); err != nil {
			return nil, fmt.Errorf("%s: the run's hints: %w", c.where, err)
		}
	}
	entries := []Entry{}
	first := map[string]string{}
	for _, f := range files {
		e := Entry{Name: f.entry, Ref: g.refOf(f.path)}
		if !g.cfg.Filter.Allows(e.Name) {
			continue
		}
		if prev, dup := first[e.Name]; dup {
			e.Err = fmt.Errorf("file %s: entry name %q is already used by file %s", f.path, e.Name, prev)
			entries = append(entries, e)
			continue
		}
		first[e.Name] = f.path
		upstream := "git" + gitReadVersion + "@" + f.blob.String()
		if h, ok := hints[e.Name]; ok && h.Upstream == upstream && !h.Quiet() {
			e.Upstream, e.Hint = upstream, &h
			entries = append(entries, e)
			continue
		}
		data, err := readBlob(sto, f.blob)
		if err != nil {
			// Not the content's fault: no Upstream, so it is read again.
			e.Err = fmt.Errorf("file %s: %w", f.path, err)
			entries = append(entries, e)
			continue
		}
		e.Upstream = upstream
		if e.Spec, err = spec.Parse(data); err != nil {
			e.Spec, e.Err = nil, fmt.Errorf("file %s: %w", f.path, err)
		}
		entries = append(entries, e)
	}
	slices.SortStableFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return entries, nil
}

// refOf is where a file is, for status and errors: the repository, the
// path and the ref, as Kustomize and Flux write a file of a repository.
// It names no commit, so an unchanged file keeps its part of the listing
// digest across commits.
func (g *Git) refOf(p string) string { return g.cfg.URL + "//" + p + "?ref=" + g.cfg.Ref }

// readBlob reads at most spec.MaxSpecBytes+1 bytes of a blob, enough for
// spec.Parse to say the file is too big.
func readBlob(sto *memory.Storage, h plumbing.Hash) ([]byte, error) {
	b, err := object.GetBlob(sto, h)
	if err != nil {
		return nil, err
	}
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, int64(spec.MaxSpecBytes)+1))
}

// fail is a fetch's error: what the repository or the transport said,
// named, without a secret, its StatusError kept (Status). A refused
// GitHub App token is dropped, so the next fetch asks for another.
func (g *Git) fail(ctx context.Context, c *gitCommit, err error) error {
	code, _ := Status(err)
	switch {
	case code == http.StatusNotFound || errors.Is(err, transport.ErrRepositoryNotFound):
		err = fmt.Errorf("not found (404): no such repository, or the credentials may not see it: %w", err)
	case code == http.StatusUnauthorized || errors.Is(err, transport.ErrAuthenticationRequired):
		err = fmt.Errorf("credentials refused or missing (401): %w", err)
		g.dropAppToken()
	case code == http.StatusForbidden || errors.Is(err, transport.ErrAuthorizationFailed):
		err = fmt.Errorf("access denied (403): %w", err)
		g.dropAppToken()
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		err = fmt.Errorf("the repository is empty: no ref %s: %w", g.cfg.Ref, err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("fetch did not finish within %s: %w", g.cfg.Timeout, err)
	}
	return redactKeepingStatus(fmt.Errorf("%s: %w", c.where, err), c.secrets)
}

// redactKeepingStatus is redact, with the StatusError (and the marks of
// Malformed) the redaction would drop put back around the redacted text.
func redactKeepingStatus(err error, secrets []string) error {
	out := redact(err, secrets)
	if out == err {
		return err
	}
	if Malformed(err) {
		out = malformed(out)
	}
	var se *StatusError
	if errors.As(err, &se) {
		return &StatusError{Code: se.Code, RetryAfter: se.RetryAfter, Err: out}
	}
	return out
}

// wholeGets makes an upstream's answers errors of this package's
// vocabulary before go-git sees them: a refusal (a status of 400 or
// more) is a StatusError with its Retry-After, and the body of a GET (the
// refs' advertisement, GitHub's API) is read whole before it is decoded,
// so a body cut short is reported as such (net/http's unexpected EOF
// against its Content-Length), not as whatever the decoder made of the
// part that came.
type wholeGets struct{ rt http.RoundTripper }

// maxRefsBytes bounds an advertisement: some 100,000 refs.
const maxRefsBytes = 16 << 20

// maxQuotedBytes bounds the refusal quoted in an error: a longer one is
// not quoted at all, rather than cut where a secret it echoes would be
// cut past redaction.
const maxQuotedBytes = 1 << 10

func (w wholeGets) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxQuotedBytes+1))
		quoted := fmt.Sprintf(": %q", bytes.TrimSpace(body))
		if len(body) > maxQuotedBytes {
			quoted = " (a body too long to quote)"
		}
		var retry string
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			retry = resp.Header.Get("Retry-After")
		}
		return nil, &StatusError{Code: resp.StatusCode, RetryAfter: retry,
			Err: fmt.Errorf("%s %s: status %s%s%s", req.Method, RedactURL(req.URL), resp.Status, quoted, retryAfterNote(retry))}
	}
	if req.Method != http.MethodGet {
		return resp, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRefsBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the answer to GET %s: %w", RedactURL(req.URL), err)
	case len(body) > maxRefsBytes:
		return nil, fmt.Errorf("the answer to GET %s is over %d bytes", RedactURL(req.URL), maxRefsBytes)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// errPackTooBig is a pack over GitConfig.MaxBytes.
var errPackTooBig = errors.New("the commit's pack is bigger than git.max_bytes")

// boundedReader fails a read past its limit instead of returning a short
// pack.
type boundedReader struct {
	r           io.Reader
	left, limit int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("%w (%d bytes)", errPackTooBig, b.limit)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// auth reads the credentials now: nil for anonymous.
func (g *Git) auth(ctx context.Context) (transport.AuthMethod, []string, error) {
	a := g.cfg.Auth
	switch a.kind() {
	case AuthToken:
		tok, err := readSecret(a.TokenEnv, a.TokenFile, "token")
		if err != nil {
			return nil, nil, err
		}
		return &githttp.BasicAuth{Username: a.Username, Password: tok}, basicSecrets(a.Username, tok), nil
	case AuthGitHubApp:
		tok, err := g.installationToken(ctx)
		if err != nil {
			return nil, nil, err
		}
		return &githttp.BasicAuth{Username: GitTokenUser, Password: tok}, basicSecrets(GitTokenUser, tok), nil
	}
	return nil, nil, nil
}

func basicSecrets(user, pass string) []string {
	return []string{pass, base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))}
}

func (g *Git) dropAppToken() {
	g.tokenMu.Lock()
	defer g.tokenMu.Unlock()
	g.appToken = ""
}

// installationToken is the GitHub App's installation token: the cached
// one until five minutes before it expires, else a new one from GitHub
// (its "Generating an installation access token for a GitHub App": a JWT
// the app signs with RS256, iat a minute in the past, exp at most ten
// minutes on, iss the app id). The lock is held through the request, so
// fetches that start together ask once.
func (g *Git) installationToken(ctx context.Context) (string, error) {
	g.tokenMu.Lock()
	defer g.tokenMu.Unlock()
	if g.appToken != "" && time.Until(g.appExpiresAt) > gitAppTokenMargin {
		return g.appToken, nil
	}
	a := g.cfg.Auth
	pemText, err := readSecret(a.PrivateKeyEnv, a.PrivateKeyFile, "private key")
	if err != nil {
		return "", err
	}
	key, err := parseRSAKey([]byte(pemText))
	if err != nil {
		// Never the key's text: only what is wrong with it.
		return "", fmt.Errorf("GitHub App private key: %w", err)
	}
	now := time.Now()
	jwt, err := signAppJWT(key, a.AppID, now)
	if err != nil {
		return "", err
	}
	u := strings.TrimRight(a.APIURL, "/") + "/app/installations/" + strconv.FormatInt(a.InstallationID, 10) + "/access_tokens"
	where := "GitHub App installation token (POST " + u + ")"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return "", fmt.Errorf("%s: %w", where, err)
	}
	req.Header.Set("Authorization", "Bearer "+jwt)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", gitHubAPIVersion)
	req.Header.Set("User-Agent", "specsync")
	resp, err := g.http.Do(req)
	if err != nil {
		return "", redact(fmt.Errorf("%s: %w", where, err), []string{jwt})
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		// GitHub's error is {"message": ...}: only that is quoted, whole,
		// so the JWT cannot show even cut short by a bound.
		var e struct {
			Message string `json:"message"`
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		msg := ""
		if json.Unmarshal(raw, &e) == nil && e.Message != "" {
			msg = ": " + strconv.Quote(e.Message)
		}
		return "", redact(fmt.Errorf("%s: status %s%s", where, resp.Status, msg), []string{jwt})
	}
	body, err := readBounded(resp, 1<<20)
	if err != nil {
		return "", redact(fmt.Errorf("%s: %w", where, err), []string{jwt})
	}
	var got struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		return "", fmt.Errorf("%s: the answer is not an access token: %w", where, err)
	}
	if got.Token == "" || got.ExpiresAt.IsZero() {
		return "", fmt.Errorf("%s: the answer has no token or no expires_at", where)
	}
	g.appToken, g.appExpiresAt = got.Token, got.ExpiresAt
	return got.Token, nil
}

// signAppJWT is a GitHub App's JWT (RFC 7519, RS256).
func signAppJWT(key *rsa.PrivateKey, appID int64, now time.Time) (string, error) {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	claims, err := json.Marshal(map[string]any{
		// A minute back and nine on: GitHub allows for clock drift and
		// refuses an exp more than ten minutes on.
		"iat": now.Add(-time.Minute).Unix(),
		"exp": now.Add(9 * time.Minute).Unix(),
		"iss": strconv.FormatInt(appID, 10),
	})
	if err != nil {
		return "", err
	}
	signing := header + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("signing the GitHub App JWT: %w", err)
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// parseRSAKey reads a PEM RSA private key: PKCS #1 (what GitHub hands
// out) or PKCS #8.
func parseRSAKey(pemText []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(bytes.TrimSpace(pemText))
	if block == nil {
		return nil, errors.New("not PEM (want -----BEGIN RSA PRIVATE KEY-----, as GitHub hands it out)")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("PEM block %q is not an RSA private key", block.Type)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("PEM block %q is a %T, not an RSA key", block.Type, k)
	}
	return rk, nil
}

// httpsURL checks a URL the source talks to: https, a host, no
// credentials (they would end up in every ref and error), no query or
// fragment.
func httpsURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return err
	case u.Scheme != "https":
		return fmt.Errorf("%q must be https", raw)
	case u.Host == "":
		return fmt.Errorf("%q has no host", raw)
	case u.User != nil:
		return errors.New("must not carry credentials; use auth")
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q must have no query or fragment", raw)
	}
	return nil
}

// checkRefName checks a branch, tag or full ref name by git's rules
// (git-check-ref-format), so a typo is a load error, not a failing run.
func checkRefName(ref string) error {
	switch {
	case ref == "":
		return errors.New("is required: a branch or tag (main, v1.2, refs/heads/main)")
	case strings.ContainsAny(ref, " ~^:?*[\\") || strings.ContainsFunc(ref, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%q has a character git refuses in a ref (space, ~ ^ : ? * [ \\ or a control character)", ref)
	case strings.Contains(ref, "..") || strings.Contains(ref, "@{") || strings.Contains(ref, "//") ||
		strings.HasPrefix(ref, "/") || strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".") ||
		strings.HasSuffix(ref, ".lock") || strings.HasPrefix(ref, "-") || ref == "@":
		return fmt.Errorf("%q is not a valid ref name", ref)
	case strings.HasPrefix(ref, "refs/") && !strings.HasPrefix(ref, "refs/heads/") && !strings.HasPrefix(ref, "refs/tags/"):
		return fmt.Errorf("%q is neither a branch (refs/heads/) nor a tag (refs/tags/)", ref)
	}
	return nil
}

// checkGlob checks a paths glob: relative, clean, and a pattern
// path.Match reads.
func checkGlob(p string) error {
	switch {
	case p == "":
		return errors.New("is empty")
	case strings.HasPrefix(p, "/"):
		return errors.New("must be relative to the repository's root")
	case path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../"):
		return errors.New("must be clean (no empty, . or .. parts, no trailing /)")
	}
	for _, part := range strings.Split(p, "/") {
		if _, err := path.Match(part, ""); err != nil {
			return fmt.Errorf("part %q: %w", part, err)
		}
	}
	return nil
}

// matchGlob matches a path against a glob part by part (path.Match),
// where a part "**" matches any number of parts, none included.
func matchGlob(glob, p string) bool {
	return matchParts(strings.Split(glob, "/"), strings.Split(p, "/"))
}

func matchParts(glob, parts []string) bool {
	for len(glob) > 0 {
		if glob[0] == "**" {
			for i := 0; i <= len(parts); i++ {
				if matchParts(glob[1:], parts[i:]) {
					return true
				}
			}
			return false
		}
		if len(parts) == 0 {
			return false
		}
		if ok, _ := path.Match(glob[0], parts[0]); !ok {
			return false
		}
		glob, parts = glob[1:], parts[1:]
	}
	return len(parts) == 0
}

// envVarName reports whether s can name an environment variable.
func envVarName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// fingerprint names the filter's expressions, for a source whose
// validator must change when what it selects does.
func (f *Filter) fingerprint() string {
	if f == nil {
		return ""
	}
	var b strings.Builder
	for _, set := range [][]*regexp.Regexp{f.allow, f.deny} {
		for _, re := range set {
			b.WriteString(re.String())
			b.WriteByte(0)
		}
		b.WriteByte(1)
	}
	return b.String()
}

// GitPush is what a push event of a Git host says (GitHub's push event,
// GitLab's Push Hook): the repository, the ref it moved and the paths its
// commits added, modified or removed. Like a Change it is a hint: a run
// reads the repository as it is.
type GitPush struct {
	// URLs are the repository's URLs as the event gives them (clone and
	// web URLs); none: the event does not say.
	URLs []string
	// Ref is the full ref name ("refs/heads/main").
	Ref string
	// Paths are the paths the pushed commits touched.
	Paths []string
	// Complete says Paths are every path the push changed: not a new or
	// deleted ref, a forced push, or a payload that lists only some of
	// the commits.
	Complete bool
}

// PushSelector is a source that a Git push can concern.
type PushSelector interface {
	// SelectPush returns the entries a push concerns: none for a push to
	// another repository or ref, or touching no file the source selects;
	// whole when it moved the source's ref and cannot say every path it
	// changed.
	SelectPush(p GitPush) (entries []string, whole bool)
}

// SelectPush maps a push to the entries of the files it touched that the
// source selects. See PushSelector.
func (g *Git) SelectPush(p GitPush) ([]string, bool) {
	if len(p.URLs) > 0 && !slices.ContainsFunc(p.URLs, func(u string) bool { return sameRepository(u, g.cfg.URL) }) {
		return nil, false
	}
	if p.Ref != g.ref && p.Ref != "refs/heads/"+g.ref && p.Ref != "refs/tags/"+g.ref {
		return nil, false
	}
	if !p.Complete {
		return nil, true
	}
	var out []string
	for _, f := range p.Paths {
		if e := entryOf(f); g.selects(f) && g.cfg.Filter.Allows(e) && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out, false
}

// sameRepository reports whether two URLs name one repository: the same
// host and path, whatever the case, a trailing ".git" or "/".
func sameRepository(a, b string) bool {
	key := func(s string) string {
		u, err := url.Parse(s)
		if err != nil {
			return s
		}
		return strings.ToLower(u.Host + "/" + strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git"))
	}
	return key(a) == key(b)
}

func init() {
	Register(Kind{Type: "git", New: func() Block { return new(GitBlock) },
		Credentials: []string{"auth.token_env", "auth.token_file", "auth.private_key_env", "auth.private_key_file"}, Order: 80})
}

// GitBlock is the registries file's git block: the spec files of a Git
// repository at a branch or tag, over HTTPS.
type GitBlock struct {
	URL      string   `json:"url"`
	Ref      string   `json:"ref"`
	Paths    []string `json:"paths"`
	Timeout  Duration `json:"timeout,omitempty"`
	MaxBytes int64    `json:"max_bytes,omitempty"`
	Auth     GitAuth  `json:"auth,omitempty"`
}

// Build checks the block and builds its source; the error lists every
// problem, each naming its field.
func (b *GitBlock) Build(bc BuildContext) (Source, error) {
	return NewGit(GitConfig{URL: b.URL, Ref: b.Ref, Paths: b.Paths, Filter: bc.Filter, Auth: b.Auth,
		Timeout: time.Duration(b.Timeout), MaxBytes: b.MaxBytes})
}

// Describe is the repository, its ref and the globs.
func (b *GitBlock) Describe() Description {
	return Description{Location: safeURL(b.URL) + "@" + b.Ref + " " + strings.Join(b.Paths, ", "), Auth: b.Auth.kind()}
}

package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// checkOCI checks the configuration of charts in an OCI registry, as the
// oci source checks its own (checkOCIHost, repositoryPrefix,
// checkRepositories), every problem naming its field of the helm block.
func (h *Helm) checkOCI(cfg *HelmConfig, authOK bool) error {
	var probs problems
	var err error
	h.nameOpts, err = checkOCIHost("helm", cfg.Host, cfg.Insecure)
	hostOK := !probs.add(err)
	if cfg.PageSize < 0 {
		probs.add(fmt.Errorf("helm.page_size %d must not be negative", cfg.PageSize))
	}
	if cfg.MaxIndexBytes != 0 {
		probs.add(errors.New("helm.max_bytes bounds a chart repository's index (helm.url); charts in an OCI registry (helm.host) have none"))
	}
	if cfg.Client != nil {
		probs.add(errors.New("helm: client is for a chart repository; an OCI registry takes a transport"))
	}
	if hostOK {
		if cfg.Prefix, err = repositoryPrefix(cfg.Host, cfg.Prefix, h.nameOpts); err != nil {
			probs.add(fmt.Errorf("helm.prefix %q is not a repository path", cfg.Prefix))
		} else {
			probs.add(checkRepositories("helm", cfg.Host, cfg.Prefix, cfg.Repositories, h.nameOpts))
		}
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultOCIPageSize
	}
	if cfg.Transport == nil {
		cfg.Transport = remote.DefaultTransport
	}
	h.backoff = cfg.Backoff
	if h.backoff.Steps == 0 {
		h.backoff = defaultOCIBackoff
	}
	if hostOK && authOK {
		h.google, err = checkGoogleOCI("helm", cfg.Auth, cfg.Host, cfg.Insecure, &cfg.Transport)
		probs.add(err)
	}
	return probs.err()
}

// fetchOCI lists the charts of an OCI registry: the repositories (listed
// or from the catalog under the prefix), each one's tags and the chosen
// version's digest (a HEAD), then, unless the digests show the listing
// unchanged, each chart's manifest, config and archive, unless the cache
// or the run's hint knows its digest (settle).
func (h *Helm) fetchOCI(ctx context.Context, opts FetchOptions) (*Listing, error) {
	c, err := connectOCI(ctx, h.cfg.Host, h.cfg.Prefix, ociClient{
		auth: h.cfg.Auth, google: h.google, transport: h.cfg.Transport,
		pageSize: h.cfg.PageSize, concurrency: h.cfg.Concurrency, backoff: h.backoff,
	})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Listing, error) {
		return c.fail(fmt.Errorf("%s: %w", c.where, timedOut(ctx, h.cfg.Timeout, err)))
	}
	names := h.cfg.Repositories
	if len(names) == 0 {
		paths, err := h.ociRepositories(ctx, c)
		if err != nil {
			return fail(err)
		}
		for _, p := range paths {
			if e, ok := entryUnder(h.cfg.Prefix, p); ok {
				names = append(names, e)
			}
		}
	}
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !h.cfg.Filter.Allows(n) })
	looked, err := h.collect(ctx, names, func(ctx context.Context, entry string) chartOutcome {
		return h.ociLookup(ctx, c, entry)
	})
	if err != nil {
		return fail(err)
	}
	if err := allFailed(looked); err != nil {
		return fail(err)
	}
	pending := slices.ContainsFunc(looked, func(o chartOutcome) bool { return o.pending })
	if err := loadVerifier(c, h.cfg.Verify, pending); err != nil {
		return nil, err
	}
	for i := range looked {
		// As the oci source's Upstream names the policy (conn.upstream).
		if looked[i].upstream != "" && c.verifier != nil {
			looked[i].upstream += " verify " + c.verifier.Digest()
		}
	}
	l, err := h.settle(ctx, looked, opts, c.secrets, func(ctx context.Context, o chartOutcome) chartOutcome {
		return h.ociRead(ctx, c, o)
	})
	if err != nil {
		return fail(err)
	}
	return l, nil
}

// ociRepositories lists every repository under the prefix as the oci
// source does: on Google's hosts with a prefix by walking tags/list
// children (oci_google.go), so Artifact Registry is asked about the
// prefix alone, not the whole region's catalog; elsewhere the catalog,
// page by page. Any failed page fails the list (a partial catalog would
// read as charts having disappeared). A full last page without a Link
// header is checked with one "last=" request, as the oci source checks
// it: a registry that cut the list there without paginating fails the
// fetch.
func (h *Helm) ociRepositories(ctx context.Context, c *conn) ([]string, error) {
	if w := (googleWalk{host: h.cfg.Host, prefix: h.cfg.Prefix, nameOpts: h.nameOpts, transport: h.cfg.Transport, backoff: h.backoff}); w.applies() {
		return w.children(ctx, c)
	}
	reg, err := name.NewRegistry(h.cfg.Host, h.nameOpts...)
	if err != nil {
		return nil, err
	}
	return catalogRepositories(ctx, c.puller, reg, c.opts, h.cfg.PageSize, "helm")
}

// ociLookup looks one repository's chart up: its tags, the version
// they offer and that version's manifest digest (a HEAD), pending; or
// nothing, or the chart's error.
func (h *Helm) ociLookup(ctx context.Context, c *conn, entry string) chartOutcome {
	path := join(h.cfg.Prefix, entry)
	where := h.cfg.Host + "/" + path
	// broken is the chart's error; version is the one read ("" before
	// one is chosen).
	broken := func(ref string, unreachable bool, version string, err error) chartOutcome {
		if version != "" {
			err = fmt.Errorf("version %s: %w", version, err)
		}
		return chartOutcome{name: entry, unreachable: unreachable, entry: &Entry{Name: entry, Ref: ref, Err: fmt.Errorf("chart %s %w", entry, err)}}
	}
	repo, err := name.NewRepository(where, h.nameOpts...)
	if err != nil {
		return broken(where, false, "", err)
	}
	tags, err := c.puller.List(ctx, repo)
	switch {
	case notFound(err):
		return chartOutcome{}
	case err != nil:
		return broken(where, true, "", fmt.Errorf("tags: %w", err))
	}
	versions := make([]chartVersion, len(tags))
	for i, t := range tags {
		// OCI tags cannot hold "+": helm pushes 1.2.3+build as 1.2.3_build.
		versions[i] = chartVersion{version: strings.ReplaceAll(t, "_", "+"), tag: t}
	}
	v, ok, err := h.pick(versions)
	if err != nil || !ok {
		// A repository none of whose tags is a version holds no chart
		// (registries hold images too): it offers nothing.
		return chartOutcome{}
	}
	tag := repo.Tag(v.tag)
	desc, err := c.puller.Head(ctx, tag)
	switch {
	case notFound(err):
		return chartOutcome{} // the tag went between the listing and now
	case err != nil:
		return broken(tag.String(), true, v.version, err)
	}
	digest := desc.Digest.String()
	return chartOutcome{name: entry, pending: true, v: v, key: digest, ref: where + "@" + digest,
		at: repo.Digest(digest), upstream: helmUpstream("oci://"+where, v.version, digest)}
}

// ociRead reads what a looked-up chart's manifest offers, from the cache
// when it knows the digest.
func (h *Helm) ociRead(ctx context.Context, c *conn, o chartOutcome) chartOutcome {
	content, ok := h.cached(o.key)
	if !ok {
		var unreachable bool
		var err error
		if content, unreachable, err = h.ociContent(ctx, c, o.at, o.v); err != nil {
			// Read again next time: no Upstream.
			return chartOutcome{name: o.name, unreachable: unreachable,
				entry: &Entry{Name: o.name, Ref: o.ref, Err: fmt.Errorf("chart %s version %s: %w", o.name, o.v.version, err)}}
		}
		// What a digest holds does not change: a broken chart stays
		// broken, and is not read again.
		h.remember(o.key, content)
	}
	where, _, _ := strings.Cut(o.ref, "@")
	out := h.readOutcome(o, content, "oci://"+where)
	if out.entry != nil {
		out.fatal = verifyEntry(ctx, c, &h.verified, o.at.Context(), o.key, out.entry, fmt.Sprintf("chart %s version %s", o.name, o.v.version))
	}
	return out
}

// ociContent is what a chart manifest holds: a problem with it is the
// content's error (cached with it); err is a failure to read it, not
// cached, and unreachable says the registry could not be talked to, as
// opposed to a blob that is not what its digest says.
func (h *Helm) ociContent(ctx context.Context, c *conn, ref name.Digest, v chartVersion) (content chartContent, unreachable bool, err error) {
	got, err := c.puller.Get(ctx, ref)
	if err != nil {
		return chartContent{}, true, err
	}
	broken := func(err error) (chartContent, bool, error) { return chartContent{err: err}, false, nil }
	if !got.MediaType.IsImage() {
		return chartContent{notChart: true}, false, nil // an index, a schema 1 manifest
	}
	var m v1.Manifest
	if err := json.Unmarshal(got.Manifest, &m); err != nil {
		return broken(fmt.Errorf("manifest: %w", err))
	}
	if m.Config.MediaType != HelmConfigMediaType {
		return chartContent{notChart: true}, false, nil
	}
	var layers []v1.Descriptor
	for _, l := range m.Layers {
		if l.MediaType == HelmContentMediaType {
			layers = append(layers, l)
		}
	}
	switch {
	case len(layers) != 1:
		return broken(fmt.Errorf("the manifest has %d chart content layers (%s), not one", len(layers), HelmContentMediaType))
	case m.Config.Size > maxChartYAMLBytes:
		return broken(fmt.Errorf("config of %d bytes is more than the %d allowed", m.Config.Size, maxChartYAMLBytes))
	case layers[0].Size > h.cfg.MaxChartBytes:
		return broken(fmt.Errorf("the archive is %d bytes, more than the %d allowed", layers[0].Size, h.cfg.MaxChartBytes))
	}
	config, unreachable, err := h.blob(ctx, c, ref.Context().Digest(m.Config.Digest.String()), m.Config.Size)
	if err != nil {
		return chartContent{}, unreachable, fmt.Errorf("config: %w", err)
	}
	var meta chartMeta
	if err := json.Unmarshal(config, &meta); err != nil {
		return broken(fmt.Errorf("config: not a chart's metadata: %w", err))
	}
	if meta.Version != v.version {
		return broken(fmt.Errorf("config: chart %q version %q, not the version its tag says", meta.Name, meta.Version))
	}
	archive, unreachable, err := h.blob(ctx, c, ref.Context().Digest(layers[0].Digest.String()), layers[0].Size)
	if err != nil {
		return chartContent{}, unreachable, fmt.Errorf("archive: %w", err)
	}
	return readChartContent(archive, h.cfg.MaxChartUnpackedBytes), false, nil
}

// blob reads a blob of the size its descriptor gave; go-containerregistry
// checks its digest as it reads. unreachable: the registry failed, as
// opposed to a blob that is not what its descriptor says.
func (h *Helm) blob(ctx context.Context, c *conn, ref name.Digest, size int64) ([]byte, bool, error) {
	l, err := c.puller.Layer(ctx, ref)
	if err != nil {
		return nil, true, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, true, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, size+1))
	switch {
	case err != nil:
		var te *transport.Error
		return nil, errors.As(err, &te) || errors.Is(err, io.ErrUnexpectedEOF) || ctx.Err() != nil, err
	case int64(len(b)) != size:
		return nil, false, fmt.Errorf("blob %s is not the %d bytes its descriptor says", ref.DigestStr(), size)
	}
	return b, false, nil
}

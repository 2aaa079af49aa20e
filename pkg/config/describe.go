package config

import (
	"net/url"
	"path"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/registry"
)

// Describe says where the registry is read from, for people (the status
// page shows it): its type, the host, URL, namespace or path, and the
// auth type. It holds no secret: credentials are named by environment
// variable or file in the registries file and never read here, and a
// URL loses its user information, query and fragment (a token can hide
// in any of them).
func (r Registry) Describe() api.Source {
	src := api.Source{Type: r.Type}
	host := func(h, prefix string) string {
		if prefix == "" {
			return h
		}
		return path.Join(h, prefix)
	}
	switch {
	case r.OCI != nil:
		src.Location, src.Auth = host(r.OCI.Host, r.OCI.Prefix), authType(r.OCI.Auth)
	case r.HTTP != nil:
		src.Location, src.Auth = safeURL(r.HTTP.URL), authType(r.HTTP.Auth)
	case r.Dir != nil && r.Dir.Embedded:
		src.Location = "the examples compiled into the binary"
	case r.Dir != nil:
		src.Location = r.Dir.Path
	case r.DockerHub != nil:
		h := r.DockerHub.Host
		if h == "" {
			h = registry.DefaultDockerHubHost
		}
		src.Location, src.Auth = host(h, r.DockerHub.Namespace), authType(r.DockerHub.Auth)
	case r.GHCR != nil:
		h := r.GHCR.Host
		if h == "" {
			h = registry.DefaultGHCRHost
		}
		src.Location, src.Auth = host(h, r.GHCR.Owner), authType(r.GHCR.Auth)
	case r.Helm != nil && r.Helm.URL != "":
		src.Location, src.Auth = safeURL(r.Helm.URL), authType(r.Helm.Auth)
	case r.Helm != nil:
		src.Location, src.Auth = "oci://"+host(r.Helm.Host, r.Helm.Prefix), authType(r.Helm.Auth)
	}
	return src
}

func authType(a registry.Auth) string {
	if a.Type == "" {
		return registry.AuthAnonymous
	}
	return a.Type
}

// safeURL is u without what may carry a secret: user information, query
// and fragment. A URL that does not parse (a loaded file's always does)
// is not shown at all.
func safeURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return registry.RedactURL(p)
}

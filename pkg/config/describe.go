package config

import (
	"github.com/specsync/specsync/pkg/api"
)

// Describe says where the registry is read from, for people (the status
// page shows it): its type, and what its source block describes
// (registry.Block's Describe: the host, URL, namespace or path, and the
// auth type). It holds no secret: credentials are named by environment
// variable or file in the registries file and never read here, and a
// URL loses its user information, query and fragment (a token can hide
// in any of them).
func (r Registry) Describe() api.Source {
	src := api.Source{Type: r.Type}
	blk := r.Block()
	if blk == nil {
		for _, b := range r.Blocks {
			blk = b
		}
	}
	if blk != nil {
		d := blk.Describe()
		src.Location, src.Auth = d.Location, d.Auth
	}
	return src
}

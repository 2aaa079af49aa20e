// Package examples holds the demo registry: a handful of APB-style service
// specs (registry/*.yaml) that `specsync-local demo` pushes to a local OCI
// registry as labelled images, and that a registry of type dir with
// `embedded: true` serves straight from the binary.
//
// The files double as documentation of the spec format and as a test
// corpus: examples_test.go parses every one and checks that together they
// use every parameter type and feature the validator knows.
package examples

import "embed"

// RegistryDir is the directory of Registry that holds the spec files, for
// fs.ReadDir(Registry, RegistryDir) or fs.Sub(Registry, RegistryDir).
const RegistryDir = "registry"

// Registry embeds the example spec files, one spec per file, under
// RegistryDir. A file's base name is its spec's name.
//
//go:embed registry
var Registry embed.FS

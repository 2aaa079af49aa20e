package reconcile

// WithoutHints makes r's runs hand their sources neither hints
// (registry.FetchOptions.Hints) nor the previous listing digest, which an
// OCI source compares with the digest of its tag lookups alone: a cold
// source then reads every manifest and config, as the code did before the
// manifest kept upstream digests. Tests and benchmarks compare both with
// the same code.
func WithoutHints(r *Runner) *Runner {
	r.noHints = true
	return r
}

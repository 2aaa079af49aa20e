// Package specsync is the deployable root of the repository. The Cloud
// Functions Go buildpack builds the package at the root of the uploaded
// source into a generated main that serves FUNCTION_TARGET; importing
// functions here registers Bootstrap, Reconcile and Catalog for it.
// The rest of the code lives in functions/ and pkg/.
package specsync

import _ "github.com/specsync/specsync/functions" // registers the functions in init

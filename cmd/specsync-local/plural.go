package main

import "fmt"

// count is n with its noun in agreement: "1 registry", "2 registries",
// "0 registries".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// stillUse says how many instances still use a spec, verb agreeing.
func stillUse(n int64) string {
	if n == 1 {
		return "1 instance still uses it"
	}
	return fmt.Sprintf("%d instances still use it", n)
}

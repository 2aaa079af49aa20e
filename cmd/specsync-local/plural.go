package main

import "fmt"

// stillUse says how many instances still use a spec, verb agreeing.
func stillUse(n int64) string {
	if n == 1 {
		return "1 instance still uses it"
	}
	return fmt.Sprintf("%d instances still use it", n)
}

package api

import "fmt"

// Count is n with its noun in agreement, for people: "1 registry",
// "2 registries", "0 registries". The CLIs, the webhooks' answers and
// the descriptions of these bodies count things this way.
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

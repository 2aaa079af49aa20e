package invariant

import "strings"

// Leaked names (masked, never whole) the canaries found in text, in every
// form scan knows: as they are, base64-encoded, and as the strings of a
// JSON text, escapes decoded; each line is also read alone (a log is
// lines of JSON). The end-to-end canary tests hold logs,
// spans, messages and answers to it, as the checker holds documents.
func Leaked(text string, canaries []string) []string {
	found := map[string]bool{}
	scan(text, canaries, found)
	for _, line := range strings.Split(text, "\n") {
		scan(line, canaries, found)
	}
	var out []string
	for _, k := range canaries {
		if k != "" && found[k] {
			out = append(out, mask(k))
		}
	}
	return out
}

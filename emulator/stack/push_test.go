package stack

import (
	"strings"
	"testing"
)

// The relay reads every line however long, keeps at most maxRelayLine
// bytes of each and counts the rest: a line it could not read would stop
// it, and the framework's writes to a full pipe would block.
func TestRelayLines(t *testing.T) {
	long := strings.Repeat("a", 3*maxRelayLine+5)
	in := "one\n" + long + "\n\nlast without newline"
	type got struct {
		line string
		cut  int
	}
	var out []got
	relayLines(strings.NewReader(in), func(line string, cut int) { out = append(out, got{line, cut}) })
	want := []got{{"one", 0}, {long[:maxRelayLine], 2*maxRelayLine + 5}, {"", 0}, {"last without newline", 0}}
	if len(out) != len(want) {
		t.Fatalf("%d lines, want %d", len(out), len(want))
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("line %d: %.20q cut %d, want %.20q cut %d", i, out[i].line, out[i].cut, want[i].line, want[i].cut)
		}
	}
}

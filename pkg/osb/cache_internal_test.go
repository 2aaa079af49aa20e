package osb

import (
	"net/http"
	"testing"
)

func TestWantsFresh(t *testing.T) {
	for _, tc := range []struct {
		header [][2]string
		want   bool
	}{
		{nil, false},
		{[][2]string{{"Cache-Control", "no-cache"}}, true},
		{[][2]string{{"Cache-Control", "No-Cache"}}, true},
		{[][2]string{{"Cache-Control", "public, no-cache"}}, true},
		{[][2]string{{"Cache-Control", `no-cache="Set-Cookie"`}}, true},
		{[][2]string{{"Cache-Control", "max-age=0"}}, true},
		{[][2]string{{"Cache-Control", "max-age = 0"}}, true},
		{[][2]string{{"Cache-Control", `max-age="0"`}}, true},
		{[][2]string{{"Cache-Control", "max-age=60"}}, false},
		{[][2]string{{"Cache-Control", "max-age=zero"}}, false},
		{[][2]string{{"Cache-Control", "no-store"}}, false},
		{[][2]string{{"Cache-Control", "no-cachex"}}, false},
		{[][2]string{{"Cache-Control", "max-age=60"}, {"Cache-Control", "no-cache"}}, true},
		{[][2]string{{"Pragma", "no-cache"}}, true},
		{[][2]string{{"Pragma", "x, No-Cache"}}, true},
		{[][2]string{{"Pragma", "x"}}, false},
		// RFC 9111 5.4: Pragma is ignored when Cache-Control is there.
		{[][2]string{{"Cache-Control", "max-age=60"}, {"Pragma", "no-cache"}}, false},
	} {
		h := http.Header{}
		for _, kv := range tc.header {
			h.Add(kv[0], kv[1])
		}
		if got := wantsFresh(h); got != tc.want {
			t.Errorf("wantsFresh(%v) = %v, want %v", h, got, tc.want)
		}
	}
}

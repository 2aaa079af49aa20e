package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// Encodings of one JSON value are one set of parameters; any change of a
// value is another.
func TestSameParameters(t *testing.T) {
	ctx := context.Background()
	digest, err := digestParameters(ctx, []byte(`{"password":"correct horse battery","size":3,"tags":["a","b"],"opts":{"x":true,"y":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		raw  string
		same bool
	}{
		{`{"password":"correct horse battery","size":3,"tags":["a","b"],"opts":{"x":true,"y":null}}`, true},
		{"{ \"opts\": {\"y\": null, \"x\": true},\n \"tags\": [\"a\", \"b\"], \"size\": 3.0, \"password\": \"correct horse battery\" }", true},
		{`{"password":"correct horse battery","size":3e0,"tags":["a","b"],"opts":{"x":true,"y":null}}`, true},
		{`{"password":"correct horse batterY","size":3,"tags":["a","b"],"opts":{"x":true,"y":null}}`, false},
		{`{"password":"correct horse battery","size":3,"tags":["b","a"],"opts":{"x":true,"y":null}}`, false},
		{`{"password":"correct horse battery","size":3,"tags":["a","b"],"opts":{"x":true}}`, false},
		{`{"password":"correct horse battery","size":"3","tags":["a","b"],"opts":{"x":true,"y":null}}`, false},
		{`{}`, false},
		{``, false},
	} {
		got, err := sameParameters(ctx, digest, []byte(c.raw))
		if err != nil || got != c.same {
			t.Errorf("%s: same %v (%v), want %v", c.raw, got, err, c.same)
		}
	}
	// No parameters: absent, null and {} are one, and nothing is derived.
	for _, raw := range []string{``, `null`, `{}`, ` { } `} {
		d, err := digestParameters(ctx, []byte(raw))
		if err != nil || d != NoParameters {
			t.Errorf("%q: digest %q %v", raw, d, err)
		}
		if same, _ := sameParameters(ctx, NoParameters, []byte(raw)); !same {
			t.Errorf("%q is not the same as none", raw)
		}
	}
	if same, _ := sameParameters(ctx, NoParameters, []byte(`{"a":1}`)); same {
		t.Error("parameters are the same as none")
	}
	// Unknown (a record from before digests) and unreadable digests never
	// make a conflict.
	for _, d := range []string{"", "sha256:abc", "$argon2id$v=19$m=4194304,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$" + strings.Repeat("A", 43)} {
		if same, err := sameParameters(ctx, d, []byte(`{"a":1}`)); err != nil || !same {
			t.Errorf("digest %q: same %v %v, want unknown (same)", d, same, err)
		}
	}
}

// A stored digest is salted Argon2id in PHC form at the cost this broker
// writes, or none, or absent: anything else (a bare fast hash, the value)
// is refused by the check the invariant rule runs.
func TestCheckParametersDigest(t *testing.T) {
	ctx := context.Background()
	d, err := digestParameters(ctx, []byte(`{"password":"hunter2"}`))
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := digestParameters(ctx, []byte(`{"password":"hunter2"}`))
	if d == d2 {
		t.Fatal("two digests of the same parameters are equal: not salted")
	}
	for _, ok := range []string{"", NoParameters, d, d2} {
		if err := CheckParametersDigest(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	fast := sha256.Sum256([]byte(`{"password":"hunter2"}`))
	parts := strings.Split(d, "$")
	for _, bad := range []string{
		hex.EncodeToString(fast[:]),
		`{"password":"hunter2"}`,
		strings.Replace(d, "argon2id", "argon2i", 1),
		strings.Replace(d, "m=19456", "m=1024", 1),           // cheaper than what is written
		strings.Replace(d, "t=2", "t=100", 1),                // costlier than a verification may be asked
		strings.Join(append(parts[:4:4], "", parts[5]), "$"), // no salt
	} {
		if err := CheckParametersDigest(bad); err == nil {
			t.Errorf("%q passes", bad)
		}
	}
}

// What a digest costs: one per provision or bind with parameters, one
// more per repeat of one.
func BenchmarkDigestParameters(b *testing.B) {
	ctx := context.Background()
	raw := []byte(`{"password":"correct horse battery","size_gb":3}`)
	for b.Loop() {
		if _, err := digestParameters(ctx, raw); err != nil {
			b.Fatal(err)
		}
	}
}

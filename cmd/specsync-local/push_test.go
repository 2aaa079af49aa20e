package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/pkg/spec"
)

// push puts each file where the seeding put it, with the file as the spec
// label, and warns about (but still pushes) a file that does not parse.
func TestPushPushesSpecFilesAsTheSeedingDid(t *testing.T) {
	r, err := emulator.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dir := t.TempDir()
	good := filepath.Join(dir, "redis.yaml")
	bad := filepath.Join(dir, "broken.yaml")
	goodYAML := "name: redis\ndescription: edited\nplans:\n  - name: p\n    description: p\n"
	if err := os.WriteFile(good, []byte(goodYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("name: [unclosed"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := realMain(context.Background(), []string{"push", "-registry", r.Host(), good, bad}, &out, &errOut); err != nil {
		t.Fatalf("push: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(errOut.String(), "broken.yaml does not parse") {
		t.Errorf("no warning for the broken file: %q", errOut.String())
	}
	for repo, want := range map[string]string{"specs/redis": goodYAML, "specs/broken": "name: [unclosed"} {
		ref, err := name.NewTag(r.Host() + "/" + repo + ":latest")
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref)
		if err != nil {
			t.Fatalf("%s: %v", repo, err)
		}
		im, err := idx.IndexManifest()
		if err != nil || len(im.Manifests) != len(emulator.SeedPlatforms) {
			t.Fatalf("%s: index %v, %v; want one image per seed platform", repo, im, err)
		}
		img, err := idx.Image(im.Manifests[0].Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := base64.StdEncoding.DecodeString(cf.Config.Labels[spec.LabelKey])
		if string(got) != want {
			t.Errorf("%s: label %q, want the file %q", repo, got, want)
		}
	}
	if n := strings.Count(out.String(), "pushed "); n != 2 {
		t.Errorf("output %q: want a line per file", out.String())
	}

	var u usageError
	if err := realMain(context.Background(), []string{"push"}, &out, &errOut); !errors.As(err, &u) {
		t.Errorf("push without files: %v, want a usage error", err)
	}
	if err := realMain(context.Background(), []string{"push", "-registry", r.Host(), filepath.Join(dir, "missing.yaml")}, &out, &errOut); err == nil {
		t.Error("push of a missing file succeeded")
	}
}

func TestShellQuoteGivesOneWord(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080": "http://127.0.0.1:8080",
		"local-broker-password": "local-broker-password",
		"a b":                   "'a b'",
		"it's $x":               `'it'\''s $x'`,
		"":                      "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

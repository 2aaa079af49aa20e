package gcs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/specsync/specsync/pkg/config/gcs"
)

// Open makes its client as a function does, with Application Default
// Credentials unless STORAGE_EMULATOR_HOST names an emulator: here
// fake-gcs-server on a loopback port, spoken to over the JSON API.
func TestOpenHonoursTheEmulatorHost(t *testing.T) {
	server, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Stop()
	server.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "deploy", Name: "specsync/registries.json"}, Content: []byte(`{"version": 1}`)})
	stored, err := server.GetObject("deploy", "specsync/registries.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(server.URL(), "http://"))
	obj, err := gcs.Open(context.Background(), "gs://deploy/specsync/registries.json")
	if err != nil {
		t.Fatal(err)
	}
	if obj.String() != "gs://deploy/specsync/registries.json" {
		t.Errorf("String %q", obj)
	}
	gen, err := obj.Generation(context.Background())
	if err != nil || gen != stored.Generation || gen == 0 {
		t.Fatalf("generation %d, %v; want %d", gen, err, stored.Generation)
	}
	data, read, err := obj.Read(context.Background())
	if err != nil || string(data) != `{"version": 1}` || read != gen {
		t.Fatalf("read %q at %d, %v", data, read, err)
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	if b, o, err := gcs.Split("gs://deploy/a/b.json"); err != nil || b != "deploy" || o != "a/b.json" {
		t.Errorf("gs://deploy/a/b.json: %q %q %v", b, o, err)
	}
	for _, bad := range []string{"gs://", "gs://deploy", "gs://deploy/", "gs:///o", "deploy/o", "https://storage.googleapis.com/deploy/o"} {
		if _, _, err := gcs.Split(bad); err == nil || !strings.Contains(err.Error(), "want gs://BUCKET/OBJECT") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

package config_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ggcr "github.com/google/go-containerregistry/pkg/registry"

	"github.com/specsync/specsync/emulator"
	"github.com/specsync/specsync/pkg/config"
	"github.com/specsync/specsync/pkg/registry"
	"github.com/specsync/specsync/pkg/verify"
	"github.com/specsync/specsync/pkg/verify/verifytest"
)

// A registry's verify block reaches the source the file builds: its
// unsigned entry is refused, saying so.
func TestVerifyBlockReachesTheSource(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	doc := "name: svc\ndescription: d\nplans:\n  - name: p\n    description: d\n"
	if _, err := emulator.PushSpecImage(context.Background(), host, "svc", "latest", base64.StdEncoding.EncodeToString([]byte(doc)), nil); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(key, []byte(verifytest.NewKey(t).PEM), 0o600); err != nil {
		t.Fatal(err)
	}
	file := fmt.Sprintf("registries:\n  - name: signed\n    type: oci\n    oci: {host: %q, insecure: true}\n    verify:\n      keys: [{pem_file: %q}]\n", host, key)
	cfg, err := config.Parse([]byte(file), "registries.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := cfg.Lookup("signed")
	l, err := b.Source.Fetch(context.Background(), registry.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 1 || l.Entries[0].Spec != nil || verify.Rejected(l.Entries[0].Err) == nil || !strings.Contains(l.Entries[0].Err.Error(), "unsigned") {
		t.Errorf("the built source offered %+v, want the unsigned entry refused", l.Entries)
	}
}

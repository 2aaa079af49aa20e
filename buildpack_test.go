package specsync_test

// This test does what the Cloud Run functions Go buildpack does with the
// source terraform uploads: copy exactly the files terraform's
// source_files.txt lists (and nothing else of the checkout), generate a
// main package that imports the root package and starts
// functions-framework-go, build it, run it once per FUNCTION_TARGET and
// call it. If the list missed a file the build needs, the root package
// stopped registering a function, or a function could not cold-start
// from its documented environment, this fails the way a deploy would.

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsync/specsync/emulator/emulatortest"
)

// generatedMain mirrors the buildpack's generated main (functions-framework
// with the user's package imported for its init side effects).
const generatedMain = `package main

import (
	"log"
	"os"

	_ "github.com/specsync/specsync"
	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	if err := funcframework.Start(port); err != nil {
		log.Fatalf("funcframework.Start: %v", err)
	}
}
`

func TestBuildpackServesEveryFunction(t *testing.T) {
	for _, v := range []string{"FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"} {
		if os.Getenv(v) == "" {
			t.Fatalf("%s is not set: run through `make test`", v)
		}
	}
	// The uploaded source: the listed files alone, in a directory of
	// their own, with the generated main beside them (inside the module,
	// as the buildpack's is, so that it builds against its go.mod).
	src := t.TempDir()
	list, err := os.ReadFile("terraform/source_files.txt")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, name := range strings.Split(string(list), "\n") {
		if name = strings.TrimSpace(name); name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("source_files.txt lists %s: %v", name, err)
		}
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		files++
	}
	if files < 50 {
		t.Fatalf("source_files.txt lists %d files; the root package alone imports more", files)
	}
	dir := filepath.Join(src, "buildpack-main")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(generatedMain), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "server")
	build := exec.Command("go", "build", "-o", bin, "./buildpack-main")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the uploaded source with the generated main: %v\n%s", err, out)
	}

	_, project := emulatortest.FirestoreProject(t)
	registries := filepath.Join(t.TempDir(), "registries.yaml")
	if err := os.WriteFile(registries, []byte("registries:\n- name: bundled\n  type: dir\n  dir: {embedded: true}\n  hook: {type: bearer, secret_env: BUILDPACK_HOOK_SECRET}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"GOOGLE_CLOUD_PROJECT=" + project,
		"SPECSYNC_REGISTRIES=" + registries,
		"SPECSYNC_ADMIN_TOKEN=buildpack-admin-token",
		"SPECSYNC_BROKER_USERNAME=u",
		"SPECSYNC_BROKER_PASSWORD=p",
		"BUILDPACK_HOOK_SECRET=buildpack-hook-secret",
	}
	cases := []struct {
		target string
		req    func(base string) *http.Request
		want   int
	}{
		{"Catalog", func(base string) *http.Request {
			r, _ := http.NewRequest("GET", base+"/v2/catalog", nil)
			r.SetBasicAuth("u", "p")
			r.Header.Set("X-Broker-API-Version", "2.17")
			return r
		}, http.StatusOK},
		{"Bootstrap", func(base string) *http.Request {
			r, _ := http.NewRequest("GET", base+"/bootstrap/last_operation", nil)
			r.Header.Set("Authorization", "Bearer buildpack-admin-token")
			return r
		}, http.StatusBadRequest}, // no operation id: the handler answered
		{"Hooks", func(base string) *http.Request {
			r, _ := http.NewRequest("POST", base+"/hooks/bundled", strings.NewReader(`{"entries":[]}`))
			return r
		}, http.StatusUnauthorized}, // no secret: the registry's hook answered
		{"Reconcile", func(base string) *http.Request {
			// A Pub/Sub push body with a malformed message: acknowledged (2xx)
			// after being decoded by the framework and the function.
			body := `{"message":{"data":"` + "bm90IGpzb24=" + `","messageId":"1"},"subscription":"projects/p/subscriptions/s"}`
			r, _ := http.NewRequest("POST", base+"/projects/"+project+"/topics/t", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			return r
		}, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.target, func(t *testing.T) {
			base, logs := startFunction(t, bin, append(append(os.Environ(), env...), "FUNCTION_TARGET="+c.target))
			resp, err := http.DefaultClient.Do(c.req(base))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("%s: %d %s, want %d\nlogs:\n%s", c.target, resp.StatusCode, b, c.want, logs.String())
			}
		})
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startFunction runs the buildpack's binary on a port picked free, and
// returns its base URL once it listens. The framework binds $PORT itself,
// so the port is released before the binary binds it and another test
// may take it in between: a binary that exits because its address is in
// use is started again on a fresh port (three times at most), never
// counted as a failure of the test.
func startFunction(t *testing.T, bin string, env []string) (string, *bytes.Buffer) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		cmd := exec.Command(bin)
		cmd.Env = append(env, fmt.Sprintf("PORT=%d", port))
		logs := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-exited })
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		if up(base, cmd.Process.Pid, port, exited) {
			return base, logs
		}
		select {
		case <-exited:
			if attempt < 3 && strings.Contains(logs.String(), "address already in use") {
				t.Logf("port %d was taken before the binary bound it; starting it again on a fresh port", port)
				continue
			}
			t.Fatalf("%s exited before it listened:\n%s", bin, logs.String())
		default:
			t.Fatalf("%s never listened on %s:\n%s", bin, base, logs.String())
		}
	}
}

// up waits up to 30 s for process pid to accept connections on base
// (port), and says whether it did before it exited. A connection alone
// proves nothing: another test's server may have taken the port first,
// so the listening socket must be the process's own.
func up(base string, pid, port int, exited <-chan struct{}) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 200*time.Millisecond)
		if err == nil {
			c.Close()
			if listensOn(pid, port) {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// listensOn says whether process pid holds a socket listening on port,
// from Linux's /proc: the LISTEN sockets of the port in /proc/net/tcp
// and tcp6 (state 0A, inode in the tenth field), among pid's files.
func listensOn(pid, port int) bool {
	sockets := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n") {
			fs := strings.Fields(l)
			if len(fs) > 9 && fs[3] == "0A" && strings.HasSuffix(fs[1], fmt.Sprintf(":%04X", port)) {
				sockets["socket:["+fs[9]+"]"] = true
			}
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && sockets[l] {
			return true
		}
	}
	return false
}

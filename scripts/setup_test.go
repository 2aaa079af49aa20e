package scripts

// The tests of scripts/setup run it on a made-up machine: PATH is a
// directory of stub commands standing in for the system's (gcloud, apt-get,
// apt-cache, sudo, id, java, ...), plus the real grep, sed and env the
// script reads its answers with. The stubs that would change the machine
// (apt-get, sudo, curl, gpg, tee, gcloud components) only write their
// command line to a log, so a test sees exactly what the script ran.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// machine is a made-up machine to run scripts/setup on.
type machine struct {
	t   *testing.T
	bin string // the stub commands: the whole PATH
	log string // what the stubs that change the machine were asked to do
	env map[string]string
}

// The commands a stub can stand for, as /bin/sh scripts. $STUB_LOG gets
// the command lines that would change the machine.
var stubs = map[string]string{
	// id -u: the user, 0 for root.
	"id": `[ "$1" = -u ] && echo "${STUB_UID:-0}"`,
	// gcloud info names the SDK root; anything else is logged.
	"gcloud": `if [ "$1" = info ]; then echo "$STUB_SDK_ROOT"; exit 0; fi
echo "gcloud $*" >>"$STUB_LOG"`,
	// apt-cache policy: google-cloud-cli from Google's source when
	// STUB_GOOGLE_SOURCE=1 (else only as dpkg's installed entry, or not at
	// all), openjdk-17-jre-headless from Debian.
	"apt-cache": `[ "$1" = policy ] || exit 0
case "$2" in
google-cloud-cli)
  echo "google-cloud-cli:"
  if [ "$STUB_GOOGLE_SOURCE" = 1 ]; then
    echo "  Installed: (none)"
    echo "  Candidate: 528.0.0-0"
    echo "  Version table:"
    echo "     528.0.0-0 500"
    echo "        500 https://packages.cloud.google.com/apt cloud-sdk/main amd64 Packages"
  else
    echo "  Installed: 528.0.0-0"
    echo "  Candidate: 528.0.0-0"
    echo "  Version table:"
    echo " *** 528.0.0-0 100"
    echo "        100 /var/lib/dpkg/status"
  fi ;;
openjdk-17-jre-headless)
  echo "openjdk-17-jre-headless:"
  echo "  Installed: (none)"
  echo "  Candidate: 17.0.15+6-1~deb12u1"
  echo "  Version table:"
  echo "     17.0.15+6-1~deb12u1 500"
  echo "        500 http://deb.debian.org/debian bookworm/main amd64 Packages" ;;
esac`,
	// apt-get: logged; fails when STUB_APT_FAIL names its first argument.
	"apt-get": `echo "apt-get $*" >>"$STUB_LOG"
[ "$STUB_APT_FAIL" != "$1" ]`,
	// sudo: logged, not run.
	"sudo": `echo "sudo $*" >>"$STUB_LOG"; cat >/dev/null`,
	"curl": `echo "curl $*" >>"$STUB_LOG"`,
	"gpg":  `echo "gpg $*" >>"$STUB_LOG"; cat >/dev/null`,
	"tee":  `echo "tee $*" >>"$STUB_LOG"; cat >/dev/null`,
	// go env GOBIN / GOPATH.
	"go": `[ "$1" = env ] || exit 0
case "$2" in GOPATH) echo "$STUB_GOPATH" ;; *) echo ;; esac`,
	"terraform": `[ "$1" = version ] && echo "Terraform v$STUB_TERRAFORM"`,
	// Present is all these need to be.
	"java": ``, "make": ``, "chromium": ``, "xz": ``,
}

// newMachine: a machine with the given stubs on PATH, as root.
func newMachine(t *testing.T, commands ...string) *machine {
	t.Helper()
	dir := t.TempDir()
	m := &machine{t: t, bin: filepath.Join(dir, "bin"), log: filepath.Join(dir, "log"),
		env: map[string]string{"HOME": dir, "STUB_UID": "0", "STUB_GOPATH": filepath.Join(dir, "go")}}
	if err := os.Mkdir(m.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	m.env["STUB_LOG"] = m.log
	if err := os.WriteFile(m.log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The real commands the script reads its answers with, and cat for tee.
	for _, name := range []string{"grep", "sed", "env", "cat", "readlink"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := os.Symlink(p, filepath.Join(m.bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	m.add("id")
	m.add(commands...)
	return m
}

// add puts stub commands on PATH.
func (m *machine) add(commands ...string) {
	m.t.Helper()
	for _, name := range commands {
		body, ok := stubs[name]
		if !ok {
			m.t.Fatalf("no stub %q", name)
		}
		if err := os.WriteFile(filepath.Join(m.bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			m.t.Fatal(err)
		}
	}
}

// sdk makes a gcloud SDK root holding the given emulators, its gcloud
// linked from PATH as packages and Homebrew link it; packaged says whether
// it came from a package (its component manager disabled) or from Google's
// archive. Its gcloud info answers nothing: the script finds the root by
// the link.
func (m *machine) sdk(packaged bool, emulators ...string) string {
	m.t.Helper()
	root := filepath.Join(m.t.TempDir(), "google-cloud-sdk")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		m.t.Fatal(err)
	}
	gcloud := filepath.Join(root, "bin", "gcloud")
	if err := os.WriteFile(gcloud, []byte("#!/bin/sh\n"+stubs["gcloud"]+"\n"), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Symlink(gcloud, filepath.Join(m.bin, "gcloud")); err != nil {
		m.t.Fatal(err)
	}
	for _, e := range emulators {
		if err := os.MkdirAll(filepath.Join(root, "platform", e), 0o755); err != nil {
			m.t.Fatal(err)
		}
	}
	core := filepath.Join(root, "lib", "googlecloudsdk", "core")
	if err := os.MkdirAll(core, 0o755); err != nil {
		m.t.Fatal(err)
	}
	config := `{"disable_updater": false, "release_channel": "rapid"}`
	if packaged {
		config = "{\n  \"config_suffix\": \"\",\n  \"disable_updater\": true,\n  \"release_channel\": \"rapid\"\n}"
	}
	if err := os.WriteFile(filepath.Join(core, "config.json"), []byte(config), 0o644); err != nil {
		m.t.Fatal(err)
	}
	return root
}

// unlinked puts a gcloud on PATH that is no link into its SDK (a snap's):
// only gcloud info names the root.
func (m *machine) unlinked(root string) {
	m.t.Helper()
	if err := os.Remove(filepath.Join(m.bin, "gcloud")); err != nil {
		m.t.Fatal(err)
	}
	m.add("gcloud")
	m.env["STUB_SDK_ROOT"] = root
}

type result struct {
	stdout, stderr string
	code           int
	ran            []string // the stubs' log: what changed the machine
}

func (r result) out() string { return r.stdout + r.stderr }

// run runs scripts/setup with args on the machine.
func (m *machine) run(args ...string) result {
	m.t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(m.log, nil, 0o644); err != nil {
		m.t.Fatal(err)
	}
	cmd := exec.Command(bash, append([]string{"setup"}, args...)...)
	cmd.Env = []string{"PATH=" + m.bin}
	for k, v := range m.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		m.t.Fatal(err)
	}
	log, err := os.ReadFile(m.log)
	if err != nil {
		m.t.Fatal(err)
	}
	if s := strings.TrimSpace(string(log)); s != "" {
		r.ran = strings.Split(s, "\n")
	}
	m.t.Logf("scripts/setup %s: exit %d\nstdout:\n%sstderr:\n%sran: %q", strings.Join(args, " "), r.code, r.stdout, r.stderr, r.ran)
	return r
}

// inOrder fails unless text holds each of want, each starting after the
// one before starts (so two may share a line break).
func inOrder(t *testing.T, text string, want ...string) {
	t.Helper()
	at := 0
	for _, w := range want {
		i := strings.Index(text[at:], w)
		if i < 0 {
			t.Fatalf("missing (or out of order) %q in:\n%s", w, text)
		}
		at += i + 1
	}
}

func lacks(t *testing.T, text string, unwanted ...string) {
	t.Helper()
	for _, u := range unwanted {
		if strings.Contains(text, u) {
			t.Fatalf("has %q:\n%s", u, text)
		}
	}
}

const (
	keyring     = "curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | gpg --dearmor --yes -o /usr/share/keyrings/cloud.google.gpg"
	sourceLine  = "echo 'deb [signed-by=/usr/share/keyrings/cloud.google.gpg] https://packages.cloud.google.com/apt cloud-sdk main' | tee /etc/apt/sources.list.d/google-cloud-sdk.list"
	installCLI  = "apt-get install -y google-cloud-cli google-cloud-cli-firestore-emulator google-cloud-cli-pubsub-emulator"
	components  = "gcloud components install cloud-firestore-emulator pubsub-emulator --quiet"
	aptEmulator = "apt-get install -y google-cloud-cli-firestore-emulator google-cloud-cli-pubsub-emulator"
)

// A machine without gcloud whose apt knows no google-cloud-cli: Google's
// key and source are added, then the CLI and its emulators installed; where
// a configured source already provides it, neither is added.
func TestSetupAddsGooglesAptSourceWhereNoneProvidesTheCLI(t *testing.T) {
	t.Run("root", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "java", "go")
		r := m.run("--dry-run", "demo")
		if r.code != 0 {
			t.Fatalf("exit %d", r.code)
		}
		inOrder(t, r.stdout, "missing: gcloud, cloud-firestore-emulator, pubsub-emulator; would run (dry run):\n",
			"\n  apt-get update\n", "\n  "+keyring+"\n", sourceLine, "\n  apt-get update\n",
			"\n  env DEBIAN_FRONTEND=noninteractive "+installCLI+"\n")
		lacks(t, r.stdout, "sudo", "openjdk")
		if r.ran != nil {
			t.Fatalf("a dry run ran %q", r.ran)
		}
	})
	t.Run("sudo", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "sudo", "curl", "gpg", "go")
		m.env["STUB_UID"] = "1000"
		r := m.run("--dry-run", "demo")
		if r.code != 0 {
			t.Fatalf("exit %d", r.code)
		}
		inOrder(t, r.stdout, "  sudo apt-get update\n",
			strings.Replace(keyring, "| gpg", "| sudo gpg", 1),
			strings.Replace(sourceLine, "| tee", "| sudo tee", 1),
			"  sudo apt-get update\n",
			"  sudo env DEBIAN_FRONTEND=noninteractive "+installCLI+" openjdk-17-jre-headless\n")
		lacks(t, r.stdout, "ca-certificates") // curl and gpg are there
		if r.ran != nil {
			t.Fatalf("a dry run ran %q", r.ran)
		}
	})
	t.Run("source configured", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "java", "go")
		m.env["STUB_GOOGLE_SOURCE"] = "1"
		r := m.run("--dry-run", "demo")
		if r.code != 0 {
			t.Fatalf("exit %d", r.code)
		}
		inOrder(t, r.stdout, "  apt-get update\n", installCLI)
		lacks(t, r.stdout, "apt-key.gpg", "sources.list.d", "tee")
		if n := strings.Count(r.stdout, "apt-get update"); n != 1 {
			t.Fatalf("apt-get update %d times", n)
		}
	})
	t.Run("SPECSYNC_SETUP_DRY_RUN", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "java", "go")
		m.env["SPECSYNC_SETUP_DRY_RUN"] = "1"
		r := m.run("test")
		inOrder(t, r.stdout, "would run (dry run)", keyring, sourceLine, installCLI+" make chromium")
		if r.code != 0 || r.ran != nil {
			t.Fatalf("exit %d, ran %q", r.code, r.ran)
		}
	})
}

// Run for real (the stubs log instead of installing), the plan runs in
// order through sudo; when a command fails (no network), it and the rest
// are printed for the user and the script exits 1.
func TestSetupRunsThePlanAndHandsOverWhatFails(t *testing.T) {
	t.Run("through sudo", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "sudo", "curl", "gpg", "go")
		m.env["STUB_UID"] = "1000"
		r := m.run("demo")
		if r.code != 0 {
			t.Fatalf("exit %d", r.code)
		}
		var asRoot []string
		for _, l := range r.ran {
			if strings.HasPrefix(l, "sudo ") {
				asRoot = append(asRoot, l)
			}
		}
		want := []string{
			"sudo apt-get update",
			"sudo gpg --dearmor --yes -o /usr/share/keyrings/cloud.google.gpg",
			"sudo tee /etc/apt/sources.list.d/google-cloud-sdk.list",
			"sudo apt-get update",
			"sudo env DEBIAN_FRONTEND=noninteractive " + installCLI + " openjdk-17-jre-headless",
		}
		if strings.Join(asRoot, "\n") != strings.Join(want, "\n") {
			t.Fatalf("ran as root:\n%s\nwant:\n%s", strings.Join(asRoot, "\n"), strings.Join(want, "\n"))
		}
		if !strings.Contains(strings.Join(r.ran, "\n"), "curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg") {
			t.Fatalf("the key was not fetched: %q", r.ran)
		}
	})
	t.Run("apt-get update fails", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "java", "go")
		m.env["STUB_GOOGLE_SOURCE"] = "1"
		m.env["STUB_APT_FAIL"] = "update"
		r := m.run("demo")
		if r.code != 1 {
			t.Fatalf("exit %d, want 1", r.code)
		}
		if strings.Join(r.ran, "\n") != "apt-get update" {
			t.Fatalf("ran %q after apt-get update failed", r.ran)
		}
		inOrder(t, r.stdout, "run these, then this again:\n  apt-get update\n  env DEBIAN_FRONTEND=noninteractive "+installCLI+"\n")
		if !regexp.MustCompile(`^setup: cannot install: 'apt-get update' failed[^\n]*\n$`).MatchString(r.stderr) {
			t.Fatalf("stderr is not one line of reason: %q", r.stderr)
		}
	})
}

// gcloud from Google's archive gets its emulators from gcloud components
// install, and says so; a packaged gcloud gets the emulator packages.
func TestSetupInstallsComponentsIntoAnArchiveGcloud(t *testing.T) {
	t.Run("archive", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "java", "go")
		m.sdk(false)
		r := m.run("--dry-run", "demo")
		if r.code != 0 {
			t.Fatalf("exit %d", r.code)
		}
		inOrder(t, r.stdout, "from Google's archive, not a package", "\n  "+components+"\n")
		lacks(t, r.stdout, "apt-get")
		if r.ran != nil {
			t.Fatalf("a dry run ran %q", r.ran)
		}
		r = m.run("demo")
		if r.code != 0 || strings.Join(r.ran, "\n") != components {
			t.Fatalf("exit %d, ran %q, want %q", r.code, r.ran, components)
		}
	})
	t.Run("archive, found by gcloud info", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "java", "go")
		m.unlinked(m.sdk(false, "cloud-firestore-emulator"))
		r := m.run("--dry-run", "demo")
		inOrder(t, r.stdout, "missing: pubsub-emulator;", "  gcloud components install pubsub-emulator --quiet\n")
	})
	t.Run("archive, one emulator there", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "java", "go")
		m.sdk(false, "pubsub-emulator")
		r := m.run("--dry-run", "demo")
		inOrder(t, r.stdout, "  gcloud components install cloud-firestore-emulator --quiet\n")
	})
	t.Run("packaged", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "java", "go")
		m.env["STUB_GOOGLE_SOURCE"] = "1"
		m.sdk(true)
		r := m.run("--dry-run", "demo")
		if r.code != 0 {
			t.Fatalf("exit %d", r.code)
		}
		inOrder(t, r.stdout, aptEmulator+"\n")
		lacks(t, r.stdout, "components install", "google-cloud-cli google-cloud-cli-")
	})
}

// Neither root nor sudo: the commands are printed for root, nothing runs,
// and the script exits 1 with a one-line reason.
func TestSetupWithoutRootOrSudoPrintsTheCommands(t *testing.T) {
	m := newMachine(t, "apt-get", "apt-cache", "java", "go")
	m.env["STUB_UID"] = "1000"
	for _, args := range [][]string{{"demo"}, {"--dry-run", "demo"}} {
		r := m.run(args...)
		if r.code != 1 {
			t.Fatalf("%v: exit %d, want 1", args, r.code)
		}
		if r.ran != nil {
			t.Fatalf("%v: ran %q", args, r.ran)
		}
		inOrder(t, r.stdout, "run these, then this again:\n  apt-get update\n", "  "+keyring+"\n", sourceLine, installCLI)
		lacks(t, r.stdout, "sudo ")
		if r.stderr != "setup: cannot install: neither root nor sudo: run the commands above as root\n" {
			t.Fatalf("%v: stderr %q", args, r.stderr)
		}
	}
}

// Nothing missing: one line, and nothing run.
func TestSetupWithNothingMissingSaysSoInOneLine(t *testing.T) {
	for _, target := range []string{"demo", "test"} {
		m := newMachine(t, "apt-get", "apt-cache", "sudo", "java", "make", "chromium", "go")
		m.env["STUB_UID"] = "1000"
		m.sdk(true, "cloud-firestore-emulator", "pubsub-emulator")
		r := m.run(target)
		if r.code != 0 || r.ran != nil {
			t.Fatalf("%s: exit %d, ran %q", target, r.code, r.ran)
		}
		if r.stderr != "" || strings.Count(r.stdout, "\n") != 1 || !strings.HasPrefix(r.stdout, "setup: nothing missing for make "+target) {
			t.Fatalf("%s: want one line, got stdout %q stderr %q", target, r.stdout, r.stderr)
		}
	}
	m := newMachine(t, "apt-get", "apt-cache", "sudo", "terraform", "xz", "go")
	m.env["STUB_TERRAFORM"] = "1.11.4"
	r := m.run("terraform")
	if want := filepath.Join(m.bin, "terraform") + "\n"; r.code != 0 || r.ran != nil || r.stdout != want || r.stderr != "" {
		t.Fatalf("terraform: exit %d, ran %q, stdout %q (want %q), stderr %q", r.code, r.ran, r.stdout, want, r.stderr)
	}
}

// Without apt-get the commands are printed for the user: Google's
// installer and gcloud components for the emulators, the rest by name.
func TestSetupOnASystemWithoutAptPrintsTheCommands(t *testing.T) {
	m := newMachine(t, "go", "sudo")
	m.env["STUB_UID"] = "1000"
	for _, args := range [][]string{{"test"}, {"--dry-run", "test"}} {
		r := m.run(args...)
		if r.code != 1 {
			t.Fatalf("%v: exit %d, want 1", args, r.code)
		}
		if r.ran != nil {
			t.Fatalf("%v: ran %q", args, r.ran)
		}
		inOrder(t, r.stdout, "run these, then this again:",
			"\n  curl -fsSL https://sdk.cloud.google.com | bash -s -- --disable-prompts --install-dir=\"$HOME\"\n",
			"  \"$HOME/google-cloud-sdk/bin/gcloud\" components install cloud-firestore-emulator pubsub-emulator --quiet\n",
			"install with the system's package manager: a Java 17+ runtime (java), make, Chromium")
		lacks(t, r.stdout, "apt-get")
		if !regexp.MustCompile(`^setup: cannot install: no apt-get[^\n]*\n$`).MatchString(r.stderr) {
			t.Fatalf("%v: stderr is not one line of reason: %q", args, r.stderr)
		}
	}
}

// scripts/setup terraform: stdout is the terraform to run; one too old or
// missing is built from the module proxy's sources into GOPATH/bin (or
// SPECSYNC_TOOLS_BIN); xz comes from xz-utils.
func TestSetupTerraform(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "xz", "go")
		r := m.run("--dry-run", "terraform")
		want := filepath.Join(m.env["STUB_GOPATH"], "bin", "terraform")
		if r.code != 0 || r.stdout != want+"\n" {
			t.Fatalf("exit %d, stdout %q, want %q", r.code, r.stdout, want)
		}
		inOrder(t, r.stderr, "missing: terraform; would run (dry run):\n", "build github.com/hashicorp/terraform@v1.11.4 into "+want)
		if r.ran != nil {
			t.Fatalf("a dry run ran %q", r.ran)
		}
	})
	t.Run("too old, SPECSYNC_TOOLS_BIN", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "terraform", "go")
		m.env["STUB_TERRAFORM"] = "1.5.7"
		m.env["SPECSYNC_TOOLS_BIN"] = "/opt/tools"
		r := m.run("--dry-run", "terraform")
		if r.code != 0 || r.stdout != "/opt/tools/terraform\n" {
			t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
		}
		inOrder(t, r.stderr, "is older), xz; would run (dry run):\n", "  apt-get update\n", "apt-get install -y xz-utils\n",
			"build github.com/hashicorp/terraform@v1.11.4 into /opt/tools/terraform")
		lacks(t, r.stderr, "google")
	})
	t.Run("no go", func(t *testing.T) {
		m := newMachine(t, "apt-get", "apt-cache", "xz")
		r := m.run("terraform")
		if r.code != 1 || r.stdout != "" || r.ran != nil {
			t.Fatalf("exit %d, stdout %q, ran %q", r.code, r.stdout, r.ran)
		}
		inOrder(t, r.stderr, "install Go 1.26", "setup: cannot install: building terraform needs Go")
	})
}

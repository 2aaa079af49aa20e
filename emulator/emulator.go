// Package emulator stands in locally for the cloud services specsync uses:
// the official Firestore and Pub/Sub emulators from the machine's
// google-cloud-cli, and an in-process OCI registry.
package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Environment variables the Google Cloud client libraries read to talk to an
// emulator instead of the real service.
const (
	FirestoreEnv = "FIRESTORE_EMULATOR_HOST"
	PubSubEnv    = "PUBSUB_EMULATOR_HOST"
)

var (
	// ErrNoGcloud means the gcloud command is not on PATH.
	ErrNoGcloud = errors.New("gcloud not found in PATH: scripts/setup test installs it (make test and make demo run it), or see https://cloud.google.com/sdk/docs/install")
	// ErrComponentMissing means gcloud is there but the emulator component
	// is not installed.
	ErrComponentMissing = errors.New("gcloud emulator component not installed")
)

// Timeouts are variables so that a slow machine can be accommodated from a
// test binary without another API.
var (
	// StartTimeout bounds how long an emulator may take to answer. The
	// Firestore emulator needs ~10 s on a cold JVM; a loaded CI box more.
	StartTimeout = 90 * time.Second
	// StopGrace is how long the JVM gets to exit on SIGTERM before SIGKILL.
	StopGrace = 10 * time.Second
)

// Process is a running emulator.
type Process struct {
	// Name is "firestore" or "pubsub".
	Name string
	// Host is "127.0.0.1:PORT", the value of the emulator's env variable.
	Host string

	envName string
	cmd     *exec.Cmd
	pgid    int
	dir     string // temp dir holding the log (and Pub/Sub's data dir)
	logPath string
	logFile *os.File
	exited  chan struct{} // closed once the gcloud wrapper has been waited for

	stopOnce sync.Once
	stopErr  error
}

type emulatorSpec struct {
	name      string
	envName   string
	component string // gcloud component id, for the error message
	apt       string // Debian package name, for the error message
	args      func(hostPort, dataDir string) []string
}

var firestoreSpec = emulatorSpec{
	name:      "firestore",
	envName:   FirestoreEnv,
	component: "cloud-firestore-emulator",
	apt:       "google-cloud-cli-firestore-emulator",
	args: func(hostPort, _ string) []string {
		return []string{"emulators", "firestore", "start", "--host-port=" + hostPort}
	},
}

func pubsubSpec(project string) emulatorSpec {
	return emulatorSpec{
		name:      "pubsub",
		envName:   PubSubEnv,
		component: "pubsub-emulator",
		apt:       "google-cloud-cli-pubsub-emulator",
		args: func(hostPort, dataDir string) []string {
			// A private data dir because the default one is shared by every
			// emulator on the machine and gets its env.yaml rewritten by each.
			return []string{"beta", "emulators", "pubsub", "start",
				"--host-port=" + hostPort, "--project=" + project, "--data-dir=" + dataDir}
		},
	}
}

// StartFirestore starts the Firestore emulator (native mode) on a free
// loopback port and returns once it answers. ctx bounds the start only; the
// emulator runs until Stop.
func StartFirestore(ctx context.Context) (*Process, error) {
	return start(ctx, firestoreSpec)
}

// StartPubSub starts the Pub/Sub emulator on a free loopback port and
// returns once it answers. The emulator serves any project; project only
// feeds gcloud's env-init file. ctx bounds the start only.
func StartPubSub(ctx context.Context, project string) (*Process, error) {
	if project == "" {
		return nil, errors.New("emulator: StartPubSub needs a project")
	}
	return start(ctx, pubsubSpec(project))
}

// Env returns "NAME=HOST", ready to append to a child's environment.
func (p *Process) Env() string { return p.envName + "=" + p.Host }

// EnvName returns the name of the variable Env sets.
func (p *Process) EnvName() string { return p.envName }

// LogPath is the file holding the emulator's combined output; it is removed
// by Stop.
func (p *Process) LogPath() string { return p.logPath }

// start starts the emulator on a free port. The port is released before
// the JVM binds it (gcloud takes a host:port, not a socket), so another
// process may take it in between: an emulator that fails to bind is
// started again on a fresh port, three times at most, rather than
// failing a test run for luck.
func start(ctx context.Context, es emulatorSpec) (*Process, error) {
	for attempt := 1; ; attempt++ {
		p, err := startOnce(ctx, es)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "ddress already in use") {
			return p, err
		}
	}
}

func startOnce(ctx context.Context, es emulatorSpec) (*Process, error) {
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return nil, ErrNoGcloud
	}
	hostPort, err := freeAddr()
	if err != nil {
		return nil, fmt.Errorf("emulator %s: %w", es.name, err)
	}
	dir, err := os.MkdirTemp("", "specsync-"+es.name+"-")
	if err != nil {
		return nil, fmt.Errorf("emulator %s: %w", es.name, err)
	}
	// Pub/Sub's gcloud writes env.yaml into its data dir without creating it.
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("emulator %s: %w", es.name, err)
	}
	logPath := filepath.Join(dir, "emulator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("emulator %s: %w", es.name, err)
	}

	cmd := exec.Command(gcloud, es.args(hostPort, filepath.Join(dir, "data"))...)
	// A file rather than a pipe: the JVM inherits these descriptors, and
	// with a pipe Wait would block until the JVM closed them too.
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// No stdin and no prompts: a missing component must fail, not wait
	// for someone to type "Y".
	cmd.Stdin = nil
	cmd.Env = append(os.Environ(), "CLOUDSDK_CORE_DISABLE_PROMPTS=1")
	// gcloud is a Python wrapper around a shell script around a JVM;
	// signalling only the wrapper leaves the JVM running, so the whole tree
	// gets a process group of its own that Stop can signal at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("emulator %s: start gcloud: %w", es.name, err)
	}
	p := &Process{
		Name:    es.name,
		Host:    hostPort,
		envName: es.envName,
		cmd:     cmd,
		pgid:    cmd.Process.Pid,
		dir:     dir,
		logPath: logPath,
		logFile: logFile,
		exited:  make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()

	if err := p.waitReady(ctx); err != nil {
		tail := p.logTail(4096)
		_ = p.Stop()
		if strings.Contains(tail, "You need the [") || strings.Contains(tail, "requires the installation of components") {
			err = fmt.Errorf("%w: install it with scripts/setup test, `gcloud components install %s` or `apt-get install %s`: %v",
				ErrComponentMissing, es.component, es.apt, err)
		}
		return nil, fmt.Errorf("emulator %s on %s: %w\n--- emulator output (tail) ---\n%s", es.name, hostPort, err, tail)
	}
	return p, nil
}

func (p *Process) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if Ready(ctx, p.Host) {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("gcloud exited before the emulator answered (%s)", p.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("not answering: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Ready reports whether an emulator answers on host: both emulators reply
// 200 "Ok" to GET /.
func Ready(ctx context.Context, host string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
	return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == "Ok"
}

// Stop terminates the emulator's whole process group (SIGTERM, then SIGKILL
// after StopGrace) and waits until none of its processes is left running.
// It is safe to call more than once.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		p.stopErr = p.stop()
		p.logFile.Close()
		os.RemoveAll(p.dir)
	})
	return p.stopErr
}

func (p *Process) stop() error {
	if err := syscall.Kill(-p.pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("emulator %s: signal process group %d: %w", p.Name, p.pgid, err)
	}
	if p.waitGroupGone(StopGrace) {
		return nil
	}
	if err := syscall.Kill(-p.pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("emulator %s: kill process group %d: %w", p.Name, p.pgid, err)
	}
	if p.waitGroupGone(5 * time.Second) {
		return nil
	}
	return fmt.Errorf("emulator %s: process group %d still running after SIGKILL", p.Name, p.pgid)
}

// waitGroupGone waits for the wrapper to be reaped and for the group to be
// empty, up to d for live processes. The JVM is reparented to init once the
// wrapper dies, so it is init that reaps it, and some inits only poll for
// orphans every few seconds; a group left with nothing but zombies for
// zombieGrace counts as gone, since an init that never reaps must not hang
// Stop.
func (p *Process) waitGroupGone(d time.Duration) bool {
	const zombieGrace = 5 * time.Second
	deadline := time.Now().Add(d)
	var zombieSince time.Time
	for {
		select {
		case <-p.exited:
			switch groupState(p.pgid) {
			case groupGone:
				return true
			case groupZombies:
				if zombieSince.IsZero() {
					zombieSince = time.Now()
				} else if time.Since(zombieSince) > zombieGrace {
					return true
				}
			default:
				zombieSince = time.Time{}
			}
		default:
		}
		if time.Now().After(deadline) && zombieSince.IsZero() {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type groupStatus int

const (
	groupGone groupStatus = iota
	groupZombies
	groupRunning
)

func groupState(pgid int) groupStatus {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return groupGone
	}
	members, ok := groupMembers(pgid)
	if !ok {
		return groupRunning // no /proc to tell zombies apart
	}
	for _, m := range members {
		if m.state != 'Z' {
			return groupRunning
		}
	}
	return groupZombies
}

type procInfo struct {
	pid     int
	state   byte
	cmdline string
}

// groupMembers lists the processes of a group from /proc; ok is false where
// there is no /proc (macOS).
func groupMembers(pgid int) (members []procInfo, ok bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// The command name is in parentheses and may itself hold spaces
		// or parentheses; the fixed fields follow the last ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g != pgid {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		members = append(members, procInfo{
			pid:     pid,
			state:   f[0][0],
			cmdline: strings.ReplaceAll(string(cmdline), "\x00", " "),
		})
	}
	return members, true
}

// logTail returns up to n bytes from the end of the emulator's output.
func (p *Process) logTail(n int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return "(no output: " + err.Error() + ")"
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return "(unreadable output: " + err.Error() + ")"
		}
	}
	b, _ := io.ReadAll(f)
	if len(b) == 0 {
		return "(no output)"
	}
	return string(b)
}

// freeAddr picks the port start gives the emulator: freeLoopbackAddr,
// except in the test that takes the first port it picks.
var freeAddr = freeLoopbackAddr

// freeLoopbackAddr asks the kernel for a free port. The port is released
// before gcloud binds it, so another process could take it in between; the
// emulator then exits and start tries a fresh port.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ResetFirestore deletes every document of project's default database in
// the Firestore emulator at host.
func ResetFirestore(ctx context.Context, host, project string) error {
	u := "http://" + host + "/emulator/v1/projects/" + url.PathEscape(project) + "/databases/(default)/documents"
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset firestore emulator: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("reset firestore emulator: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// Command withemulators runs a command with the Firestore and Pub/Sub
// emulators available to it:
//
//	go run ./emulator/cmd/withemulators [-firestore] [-pubsub] [-project P] -- cmd args...
//
// Without -firestore or -pubsub it provides both. An emulator already named
// by FIRESTORE_EMULATOR_HOST or PUBSUB_EMULATOR_HOST that answers is reused
// as is; otherwise one is started, and stopped again when the command ends
// or withemulators gets SIGINT or SIGTERM. It exits with the command's exit
// code.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/specsync/specsync/emulator"
)

func main() {
	os.Exit(realMain())
}

func realMain() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("cmd", "withemulators")
	fs := flag.NewFlagSet("withemulators", flag.ContinueOnError)
	wantFS := fs.Bool("firestore", false, "provide the Firestore emulator")
	wantPS := fs.Bool("pubsub", false, "provide the Pub/Sub emulator")
	project := fs.String("project", "specsync-local", "project id given to the Pub/Sub emulator")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: withemulators [-firestore] [-pubsub] [-project P] -- cmd args...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	args := fs.Args()
	if len(args) == 0 {
		fs.Usage()
		return 2
	}
	if !*wantFS && !*wantPS {
		*wantFS, *wantPS = true, true
	}

	// Signals are caught from here on so that an interrupt during the
	// (slow) emulator start still stops what was started.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		select {
		case s := <-sigs:
			log.Info("signal during emulator start", "signal", s)
			cancel(signalError{s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()

	type want struct {
		env   string
		start func(context.Context) (*emulator.Process, error)
	}
	var wants []want
	if *wantFS {
		wants = append(wants, want{emulator.FirestoreEnv, emulator.StartFirestore})
	}
	if *wantPS {
		wants = append(wants, want{emulator.PubSubEnv, func(ctx context.Context) (*emulator.Process, error) {
			return emulator.StartPubSub(ctx, *project)
		}})
	}

	var (
		mu      sync.Mutex
		started []*emulator.Process
		env     = os.Environ()
		errs    []error
		wg      sync.WaitGroup
	)
	stopAll := func() {
		var wg sync.WaitGroup
		for _, p := range started {
			wg.Go(func() {
				if err := p.Stop(); err != nil {
					log.Error("stop emulator", "emulator", p.Name, "err", err)
				} else {
					log.Info("stopped emulator", "emulator", p.Name)
				}
			})
		}
		wg.Wait()
	}
	defer stopAll()

	// Both at once: Firestore alone takes several seconds to answer.
	for _, w := range wants {
		if host := os.Getenv(w.env); host != "" {
			if emulator.Ready(ctx, host) {
				log.Info("reusing emulator", w.env, host)
				continue
			}
			log.Warn("emulator named in the environment does not answer; starting another", w.env, host)
		}
		wg.Go(func() {
			t0 := time.Now()
			p, err := w.start(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			log.Info("started emulator", "emulator", p.Name, w.env, p.Host, "took", time.Since(t0).Round(time.Millisecond))
			started = append(started, p)
			env = append(env, p.Env())
		})
	}
	wg.Wait()
	if se, ok := context.Cause(ctx).(signalError); ok {
		return 128 + int(se.sig)
	}
	if err := errors.Join(errs...); err != nil {
		// Unstructured: the error carries the emulator's multi-line output,
		// which a log attribute would flatten into one escaped string.
		log.Error("start emulators failed")
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cancel(nil) // ends the start-time signal goroutine; signals go to the child now

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		log.Error("start command", "cmd", args[0], "err", err)
		return 127
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var err error
	for forwarded := 0; ; {
		select {
		case err = <-waited:
		case s := <-sigs:
			// A terminal's ^C reaches the child directly (same process
			// group), but a SIGTERM from a supervisor reaches only us.
			// A second signal means the child is not listening.
			forwarded++
			if forwarded == 1 {
				log.Info("forwarding signal to command", "signal", s)
				_ = cmd.Process.Signal(s)
			} else {
				log.Info("killing command", "signal", s)
				_ = cmd.Process.Kill()
			}
			continue
		}
		break
	}
	return exitCode(cmd, err, log)
}

type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string { return "interrupted by " + e.sig.String() }

func exitCode(cmd *exec.Cmd, err error, log *slog.Logger) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		log.Error("wait for command", "err", err)
		return 1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

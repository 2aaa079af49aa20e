package main

import (
	"errors"
	"fmt"
)

// Exit codes scripts can rely on (docs/cli.md#exit-codes).
const (
	ExitOK       = 0
	ExitFailed   = 1 // the thing asked about failed: a bootstrap, a config check, status --check
	ExitUsage    = 2 // bad flags or arguments
	ExitAuth     = 3 // the API refused the credentials (401, 403) or none were configured
	ExitAPI      = 4 // the API answered an error, or could not be reached
	ExitTimeout  = 5 // --wait-timeout passed before the bootstrap finished
	exitInternal = 1
)

// exitError carries an exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withExit(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

func exitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitInternal
}

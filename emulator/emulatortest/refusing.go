package emulatortest

import (
	"fmt"
	"syscall"
	"testing"
)

// RefusingAddr is a loopback host:port that refuses connections for the
// rest of the test, and that no other test can take: a socket bound to it
// without SO_REUSEADDR and never listening. A port picked free and closed
// is not that: another test's server may bind it in between and answer,
// which turned a "connection refused" case into an HTTP answer once in
// five whole-suite runs.
func RefusingAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("a socket for a refusing address: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind a refusing address: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("the refusing address: %v", err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

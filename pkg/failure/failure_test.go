package failure

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestKindOf(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		kind      Kind
		retryable bool
	}{
		{"nil", nil, Unknown, false},
		{"plain", errors.New("x"), Unknown, true},
		{"classified", New(Invalid, "bad %s", "thing"), Invalid, false},
		{"wrapped classified", fmt.Errorf("ctx: %w", New(Conflict, "c")), Conflict, false},
		{"grpc not found", status.Error(codes.NotFound, "nf"), NotFound, false},
		{"wrapped grpc unavailable", fmt.Errorf("firestore: %w", status.Error(codes.Unavailable, "u")), Unavailable, true},
		{"grpc aborted", status.Error(codes.Aborted, "a"), Precondition, true},
		{"grpc already exists", status.Error(codes.AlreadyExists, "e"), Conflict, false},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), Unavailable, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := KindOf(c.err); got != c.kind {
				t.Errorf("KindOf = %v, want %v", got, c.kind)
			}
			if got := Retryable(c.err); got != c.retryable {
				t.Errorf("Retryable = %v, want %v", got, c.retryable)
			}
		})
	}
}

func TestWrapKeepsChain(t *testing.T) {
	base := errors.New("base")
	err := Wrap(NotFound, base)
	if !errors.Is(err, base) || err.Error() != "base" || !Is(err, NotFound) {
		t.Fatalf("Wrap lost the chain or message: %v", err)
	}
	if Wrap(Invalid, nil) != nil {
		t.Fatal("Wrap(nil) must be nil")
	}
}

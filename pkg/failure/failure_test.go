package failure

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// Describe hands a client our own words and never a backend's: an error
// whose chain holds a backend's text (AnnotateBackend of an unclassified
// error) is described by its kind alone, however it is wrapped after.
func TestDescribe(t *testing.T) {
	backend := status.Error(codes.InvalidArgument, "projects/p/databases/(default)/documents/instances/.. is not a document")
	for _, c := range []struct {
		name string
		err  error
		ours bool
	}{
		{"ours", New(Invalid, "service x is not in the catalog"), true},
		{"ours annotated", AnnotateBackend(New(NotFound, "instance i does not exist"), "read instance %s", "i"), true},
		{"backend", AnnotateBackend(backend, "read instance %s", ".."), false},
		{"backend wrapped again", Wrap(Invalid, fmt.Errorf("x: %w", AnnotateBackend(backend, "read"))), false},
		{"backend joined", errors.Join(New(Invalid, "a"), AnnotateBackend(backend, "b")), false},
		{"client library", AnnotateBackend(errors.New("firestore: ID in DocumentRef contains invalid UTF-8"), "read"), false},
	} {
		got := Describe(c.err)
		if c.ours != (got == c.err.Error()) {
			t.Errorf("%s: Describe = %q", c.name, got)
		}
		if Internal(c.err) == c.ours {
			t.Errorf("%s: Internal = %v", c.name, c.ours)
		}
		if strings.Contains(got, "projects/") || strings.Contains(got, "firestore") {
			t.Errorf("%s: %q holds the backend's text", c.name, got)
		}
	}
	if KindOf(AnnotateBackend(backend, "read")) != Invalid {
		t.Error("AnnotateBackend lost the kind")
	}
}

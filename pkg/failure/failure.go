// Package failure is specsync's error vocabulary. Backends map their own
// error codes into these kinds in one place (here), and callers branch on
// the kind, never on message text: an HTTP handler picks a status code, a
// Pub/Sub handler decides between "retry" and "record and acknowledge".
package failure

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Kind classifies an error by what the caller should do about it.
type Kind int

const (
	// Unknown is an error nobody classified; treated as transient, because
	// retrying an unclassified error is safer than dropping work.
	Unknown Kind = iota
	// Invalid input: bad config, bad request, malformed message. Retrying
	// the same input cannot help.
	Invalid
	// NotFound: the thing named does not exist.
	NotFound
	// Conflict: the request contradicts current state (an id owned by
	// another registry, an instance that exists with other values).
	Conflict
	// Precondition: state changed under us or is not what the operation
	// needs (a spec marked for deletion); retrying later may succeed.
	Precondition
	// Unavailable: a dependency is down, slow or contended; retry.
	Unavailable
)

func (k Kind) String() string {
	switch k {
	case Invalid:
		return "invalid"
	case NotFound:
		return "not_found"
	case Conflict:
		return "conflict"
	case Precondition:
		return "precondition"
	case Unavailable:
		return "unavailable"
	default:
		return "unknown"
	}
}

// Error carries a kind and wraps the underlying error.
type Error struct {
	Kind Kind
	Err  error
	// Internal says the message holds a backend's own text (resource
	// paths, status messages, client library errors): for the log,
	// never for a client (see Describe).
	Internal bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// New returns an error of the given kind with a formatted message.
func New(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Err: fmt.Errorf(format, args...)}
}

// Wrap classifies err as k, keeping its message and chain.
func Wrap(k Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: k, Err: err}
}

// KindOf returns the kind of the first classified error in err's chain,
// classifying gRPC status codes (Firestore, Pub/Sub) and context errors on
// the way.
func KindOf(err error) Kind {
	if err == nil {
		return Unknown
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return Unavailable
	}
	if s, ok := status.FromError(err); ok {
		return fromCode(s.Code())
	}
	// Wrapped gRPC errors: status.FromError only looks at the top.
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		return fromCode(gs.GRPCStatus().Code())
	}
	return Unknown
}

func fromCode(c codes.Code) Kind {
	switch c {
	case codes.InvalidArgument, codes.OutOfRange, codes.Unimplemented:
		return Invalid
	case codes.NotFound:
		return NotFound
	case codes.AlreadyExists:
		return Conflict
	case codes.FailedPrecondition, codes.Aborted:
		return Precondition
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Internal, codes.Canceled:
		return Unavailable
	default:
		return Unknown
	}
}

// Is reports whether err is of kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }

// Retryable reports whether repeating the operation later may succeed.
func Retryable(err error) bool {
	switch KindOf(err) {
	case Invalid, NotFound, Conflict:
		return false
	default:
		return err != nil
	}
}

// Annotate adds context to err and fixes its kind: the kind already in
// its chain if there is one, else the one its backend code maps to. It is
// the one place storage errors get classified.
func Annotate(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: KindOf(err), Err: fmt.Errorf(format+": %w", append(args, err)...)}
}

// AnnotateBackend is Annotate for a backend's error (a store's): unless
// its chain already holds a classified error, which is worded by us for
// whoever reads it, its text is the backend's and is marked Internal, so
// that Describe never hands it to a client.
func AnnotateBackend(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var e *Error
	ours := errors.As(err, &e)
	return &Error{Kind: KindOf(err), Err: fmt.Errorf(format+": %w", append(args, err)...), Internal: !ours}
}

// Describe is what a client may be told of err: its message, unless any
// error in its chain is Internal; then a sentence of its kind alone (the
// whole error belongs in the log).
func Describe(err error) string {
	if err == nil {
		return ""
	}
	if Internal(err) {
		return describeKind(KindOf(err))
	}
	return err.Error()
}

// Internal reports whether any error in err's chain, wrapped (Unwrap()
// error) or joined (Unwrap() []error), is an Internal one: its text is a
// backend's, for the log and never for a client (Describe).
func Internal(err error) bool {
	for e := err; e != nil; {
		if fe, ok := e.(*Error); ok && fe.Internal {
			return true
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			e = u.Unwrap()
		case interface{ Unwrap() []error }:
			return slices.ContainsFunc(u.Unwrap(), Internal)
		default:
			e = nil
		}
	}
	return false
}

func describeKind(k Kind) string {
	switch k {
	case Invalid:
		return "the store refused a value of the request"
	case NotFound:
		return "not found"
	case Conflict:
		return "the request conflicts with what is stored"
	case Precondition:
		return "what is stored changed while the request ran"
	default:
		return "the store did not answer"
	}
}

package registry

import (
	"errors"
	"net/http"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// StatusError is an upstream's answer other than success to a request a
// fetch could not do without (a listing page, an index): its HTTP status
// and, when the upstream asked to be retried later, its Retry-After. A
// fetch's error wraps it, so callers branch on Code (Status), never on
// the text; the text, which the registry's status records, names both.
type StatusError struct {
	Code int
	// RetryAfter is the Retry-After header as the upstream sent it ("" for
	// none): a run never waits for it, the next scheduled one tries again.
	RetryAfter string
	Err        error
}

func (e *StatusError) Error() string { return e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

// Status is the upstream status a fetch's error carries (a StatusError,
// or go-containerregistry's transport error) and its Retry-After; 0 when
// the fetch failed otherwise (unreachable, a timeout, a body that does
// not parse).
func Status(err error) (code int, retryAfter string) {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code, se.RetryAfter
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode, ""
	}
	return 0, ""
}

// retryAfterNote is what an error's text says of a Retry-After.
func retryAfterNote(v string) string {
	if v == "" {
		return ""
	}
	return "; Retry-After: " + v + " (this run does not wait, a later one will try again)"
}

// retryAfters remembers the last Retry-After a registry sent with a 429 or
// 503 during one fetch: go-containerregistry's errors keep the status but
// not the headers.
type retryAfters struct {
	inner http.RoundTripper
	last  *atomic.Value // string
}

func (t retryAfters) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.inner.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if v := resp.Header.Get("Retry-After"); v != "" {
			t.last.Store(v)
		}
	}
	return resp, err
}

// withRetryAfter is err, a registry's refusal, as a StatusError naming the
// Retry-After the registry sent with it, if it did.
func withRetryAfter(err error, last *atomic.Value) error {
	var te *transport.Error
	v, _ := last.Load().(string)
	if v == "" || !errors.As(err, &te) || (te.StatusCode != http.StatusTooManyRequests && te.StatusCode != http.StatusServiceUnavailable) {
		return err
	}
	return &StatusError{Code: te.StatusCode, RetryAfter: v, Err: errors.New(err.Error() + retryAfterNote(v))}
}

// malformedError is an upstream's answer that does not parse as what was
// asked for (a listing page, an index): its text is the parser's.
type malformedError struct{ err error }

func (e *malformedError) Error() string { return e.err.Error() }
func (e *malformedError) Unwrap() error { return e.err }

// malformed marks err as an answer that does not parse (Malformed).
func malformed(err error) error {
	if err == nil {
		return nil
	}
	return &malformedError{err: err}
}

// Malformed reports whether a fetch failed on an answer that does not
// parse as a listing (garbage where a page or an index was due), as
// opposed to a status, a truncated body or a timeout.
func Malformed(err error) bool {
	var m *malformedError
	return errors.As(err, &m)
}

// Package web is the HTTP plumbing every surface of specsync shares: the
// broker (pkg/osb), the webhooks (pkg/hooks), the bootstrap
// (pkg/bootstrap), the functions' entry points and the local stack.
// Errors are OSB-shaped JSON bodies (api.ErrorBody) whatever the surface,
// because one error shape is what the CLI and every client parse; beside
// them: methods and the query contract, body limits, authorization
// parsing and the admin rule, credential checks, request identity, and
// the id contract of the edge. Nothing here knows the broker.
package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"

	"github.com/specsync/specsync/pkg/api"
	"github.com/specsync/specsync/pkg/failure"
)

// WriteJSON writes v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError writes an OSB error body.
func WriteError(w http.ResponseWriter, status int, code, format string, args ...any) {
	WriteJSON(w, status, api.ErrorBody{Error: code, Description: fmt.Sprintf(format, args...)})
}

// WriteFailure maps a classified error to a status code: the one place
// handler errors become HTTP. What a client is told is
// failure.Describe's: our own refusals in full, a sentence of its kind
// for anything whose text is the store's (Firestore's status text names
// the project, database and document path); the whole error then goes
// to the log.
func WriteFailure(w http.ResponseWriter, err error) {
	WriteFailureTo(w, nil, err)
}

// WriteFailureTo is WriteFailure logging to log (nil: slog.Default), the
// logger of the handler that answers.
func WriteFailureTo(w http.ResponseWriter, log *slog.Logger, err error) {
	desc := DescribeTo(log, err)
	switch failure.KindOf(err) {
	case failure.Invalid:
		WriteError(w, http.StatusBadRequest, "BadRequest", "%s", desc)
	case failure.NotFound:
		WriteError(w, http.StatusNotFound, "NotFound", "%s", desc)
	case failure.Conflict:
		WriteError(w, http.StatusConflict, "Conflict", "%s", desc)
	case failure.Precondition:
		WriteError(w, http.StatusUnprocessableEntity, "ConcurrencyError", "%s", desc)
	default:
		WriteError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the broker's store is unavailable, try again: %s", desc)
	}
}

// Describe is what a client is told of err (failure.Describe); when that
// is not the whole error (failure.Internal), the whole error is logged.
func Describe(err error) string {
	return DescribeTo(nil, err)
}

// DescribeTo is Describe logging to log (nil: slog.Default): a handler
// given a logger logs there, where its tests and its deployment read.
func DescribeTo(log *slog.Logger, err error) string {
	desc := failure.Describe(err)
	if failure.Internal(err) {
		if log == nil {
			log = slog.Default()
		}
		log.Warn("a store error answered without its text", "kind", failure.KindOf(err).String(), "error", err.Error())
	}
	return desc
}

// NotFound is the handler for paths no route matches.
func NotFound(w http.ResponseWriter, r *http.Request) {
	WriteError(w, http.StatusNotFound, "NotFound", "no such endpoint: %s %s", Quote(r.Method), Quote(r.URL.Path))
}

// Methods wraps per-method handlers of one path: another method is a 405
// with an Allow header and an OSB error body (the standard mux's 405 is
// plain text), and a query string that does not parse or repeats a
// parameter is a 400 (checkQuery). Its routes are authenticated before
// it (the broker's middleware): a refused caller learns nothing of the
// query.
func Methods(handlers map[string]http.HandlerFunc) http.Handler {
	return methods(handlers, true)
}

// MethodsOnly is Methods without the query check, for a handler that
// authenticates each request itself (a webhook, by its registry's own
// secret) and then checks the query with CheckQuery: authentication comes
// before anything else about the request.
func MethodsOnly(handlers map[string]http.HandlerFunc) http.Handler {
	return methods(handlers, false)
}

// CheckQuery answers 400 for a query string that does not parse or
// repeats a parameter, and says whether the request may go on.
func CheckQuery(w http.ResponseWriter, r *http.Request) bool {
	if err := checkQuery(r.URL.RawQuery); err != nil {
		WriteError(w, http.StatusBadRequest, "BadRequest", "%s", err)
		return false
	}
	return true
}

func methods(handlers map[string]http.HandlerFunc, query bool) http.Handler {
	allow := ""
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		if _, ok := handlers[m]; ok {
			if allow != "" {
				allow += ", "
			}
			allow += m
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := handlers[r.Method]
		if !ok && r.Method == http.MethodHead {
			h, ok = handlers[http.MethodGet]
		}
		if !ok {
			w.Header().Set("Allow", allow)
			WriteError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "%s is not allowed on %s; allowed: %s", Quote(r.Method), Quote(r.URL.Path), allow)
			return
		}
		// One query contract for every route (SingleQuery's).
		if query && !CheckQuery(w, r) {
			return
		}
		h(w, r)
	})
}

// DefaultMaxBodyBytes is the request body limit when none is configured.
const DefaultMaxBodyBytes = 64 << 10

func tooLarge(w http.ResponseWriter, limit int64) {
	WriteError(w, http.StatusRequestEntityTooLarge, "PayloadTooLarge", "request body is larger than %d bytes", limit)
}

// LimitBody guards a whole HTTP surface: a request whose Content-Length is
// over limit is refused with 413 before anything reads it (before
// authentication too: it costs nothing to refuse, and says only the
// documented limit), and any other body is cut off past limit, so a
// chunked one fails as soon as it crosses the limit (DecodeBody makes that
// a 413).
func LimitBody(limit int64, next http.Handler) http.Handler {
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			tooLarge(w, limit)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// DecodeBody reads a JSON body of at most limit bytes into v: too big is
// 413, whatever the bytes are, malformed is 400, and so is a key that
// names one of v's fields in another case or appears twice in an object
// (checkKeys). A Content-Length over the
// limit is refused before a byte is read; a body without one (chunked) is
// read up to the limit and no further. It reports whether the handler may
// go on.
func DecodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	if r.ContentLength > limit {
		tooLarge(w, limit)
		return false
	}
	// The whole body first, then the JSON: a decoder stops at the first
	// bad byte, which would make 4 MiB of garbage a 400 instead of a 413.
	body, err := readAll(w, r, limit)
	if err != nil {
		ReadBodyError(w, err, limit)
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		WriteError(w, http.StatusBadRequest, "MalformedJSON", "request body is not valid JSON: %v", err)
		return false
	}
	// dec.More is false before a stray '}' or ']', so "{}}" would pass:
	// only the end of the body may follow the value.
	if _, err := dec.Token(); err != io.EOF {
		WriteError(w, http.StatusBadRequest, "MalformedJSON", "request body holds more than one JSON value")
		return false
	}
	// Keys as the body wrote them: none read under another case, none
	// given twice (strictjson.go).
	if err := checkKeys(body, reflect.TypeOf(v)); err != nil {
		WriteError(w, http.StatusBadRequest, "BadRequest", "%s", err)
		return false
	}
	return true
}

// readAll reads a body up to limit for DecodeBody.
func readAll(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}

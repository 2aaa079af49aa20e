// Package logging builds the structured JSON logger every specsync binary
// and function uses. Cloud Logging reads "severity" and "message" from a
// JSON line on stdout/stderr, so slog's "level" and "msg" are renamed.
package logging

import (
	"io"
	"log/slog"
	"strings"
)

// New returns a JSON logger writing to w at the given level ("debug",
// "info", "warn", "error"; anything else is info). A line logged with a
// context (InfoContext and the like) inside a span, or inside a request
// whose trace header Handler in pkg/telemetry read, names that trace
// (see Trace): Logs Explorer then shows it with the trace, and the trace
// with its lines.
func New(w io.Writer, level string, opts ...Option) *slog.Logger {
	o := options{}
	for _, f := range opts {
		f(&o)
	}
	return slog.New(traceHandler{Handler: slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       ParseLevel(level),
		ReplaceAttr: cloudLogging,
	}), project: o.project})
}

// Option configures New.
type Option func(*options)

type options struct{ project string }

// Project is the Google Cloud project traces are written to: the trace
// field names it (projects/P/traces/ID), as Cloud Logging wants.
func Project(p string) Option { return func(o *options) { o.project = p } }

// ParseLevel maps a level name to a slog level.
func ParseLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func cloudLogging(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		return slog.String("severity", severity(a.Value.Any().(slog.Level)))
	case slog.MessageKey:
		a.Key = "message"
	case slog.TimeKey:
		a.Key = "time"
	}
	return a
}

// severity maps slog levels onto Cloud Logging's LogSeverity names.
func severity(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARNING"
	case l >= slog.LevelInfo:
		return "INFO"
	default:
		return "DEBUG"
	}
}

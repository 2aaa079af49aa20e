package logging

import "net/http"

// StatusWriter remembers the status a handler wrote (200 when it wrote
// a body without one), for the request's log line or span. Flush and
// Unwrap keep long polls working through it: a handler's Flush, or
// http.ResponseController's, reaches the server's writer.
type StatusWriter struct {
	http.ResponseWriter
	Status int // 0 until the handler writes
}

func (w *StatusWriter) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *StatusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

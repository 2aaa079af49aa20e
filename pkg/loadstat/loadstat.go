// Package loadstat summarises latencies of the loopback load tests and
// prints figures in one parseable form, "FIGURE name value unit", which
// scripts/reliability turns into the tables of docs/RELIABILITY.md.
package loadstat

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Recorder collects request latencies from many goroutines.
type Recorder struct {
	mu   sync.Mutex
	lat  []time.Duration
	errs int
	// FirstErr is the first error seen, for the failure message.
	FirstErr error
}

// Add records one request: its latency, or its error.
func (r *Recorder) Add(d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs++
		if r.FirstErr == nil {
			r.FirstErr = err
		}
		return
	}
	r.lat = append(r.lat, d)
}

// Summary is what a load run measured.
type Summary struct {
	Requests int
	Errors   int
	P50, P99 time.Duration
	RPS      float64
}

// Summary computes the figures over a run of the given wall time.
func (r *Recorder) Summary(wall time.Duration) Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Summary{Requests: len(r.lat) + r.errs, Errors: r.errs}
	if len(r.lat) > 0 {
		l := append([]time.Duration(nil), r.lat...)
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		s.P50 = l[len(l)/2]
		s.P99 = l[min(len(l)-1, len(l)*99/100)]
	}
	if wall > 0 {
		s.RPS = float64(s.Requests) / wall.Seconds()
	}
	return s
}

// Figure formats one figure line.
func Figure(name string, value float64, unit string) string {
	return fmt.Sprintf("FIGURE %s %g %s", name, value, unit)
}

// Lines are the figure lines of a summary, names prefixed.
func (s Summary) Lines(prefix string) []string {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return []string{
		Figure(prefix+".requests", float64(s.Requests), "requests"),
		Figure(prefix+".errors", float64(s.Errors), "errors"),
		Figure(prefix+".p50", ms(s.P50), "ms"),
		Figure(prefix+".p99", ms(s.P99), "ms"),
		Figure(prefix+".rps", float64(int(s.RPS)), "req/s"),
	}
}

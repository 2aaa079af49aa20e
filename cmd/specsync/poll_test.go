package main

import (
	"testing"
	"time"
)

// --wait polls soon after starting (most bootstraps end within a second
// or two), then at the server's pace, never slower than maxPoll.
func TestPollDelayStartsShortAndDoublesToTheServersPace(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		n          int
		retryAfter time.Duration
		want       time.Duration
	}{
		{0, 5 * time.Second, 100 * ms},
		{1, 5 * time.Second, 200 * ms},
		{2, 5 * time.Second, 400 * ms},
		{5, 5 * time.Second, 3200 * ms},
		{6, 5 * time.Second, 5 * time.Second},
		{50, 5 * time.Second, 5 * time.Second},
		{3, time.Second, 800 * ms},
		{4, time.Second, time.Second},
		{10, 0, defaultPoll},
		{10, time.Minute, maxPoll},
	} {
		if got := pollDelay(c.n, c.retryAfter); got != c.want {
			t.Errorf("pollDelay(%d, %s) = %s, want %s", c.n, c.retryAfter, got, c.want)
		}
	}
	// An operation of 0.6 s is seen ended within a second: the first
	// polls' waits sum past 0.6 s at the fourth.
	var sum time.Duration
	n := 0
	for sum < 600*ms {
		sum += pollDelay(n, 5*time.Second)
		n++
	}
	if sum > time.Second || n > 4 {
		t.Errorf("a 0.6 s operation is seen after %s and %d polls", sum, n+1)
	}
}

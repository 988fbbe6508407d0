package soft

import (
	"sync/atomic"
	"time"
)

// Clock gives the dataplane its notion of time in nanoseconds. Timestamps
// put in INT metadata (bits 4 and 5) are Clock values, so a real clock
// should return POSIX nanoseconds.
type Clock interface {
	Now() int64
}

// RealClock is monotonic time expressed as POSIX nanoseconds: the wall
// clock read once at creation plus the monotonic time elapsed since, so it
// never jumps backwards when the wall clock is adjusted.
type RealClock struct {
	base  time.Time
	epoch int64
}

// NewRealClock returns a RealClock starting now.
func NewRealClock() *RealClock {
	t := time.Now()
	return &RealClock{base: t, epoch: t.UnixNano()}
}

// Now implements Clock.
func (c *RealClock) Now() int64 { return c.epoch + int64(time.Since(c.base)) }

// ManualClock only moves when told to; tests use it to make queueing and
// latency deterministic. It is safe for concurrent use.
type ManualClock struct{ t atomic.Int64 }

// NewManualClock returns a clock reading start.
func NewManualClock(start int64) *ManualClock {
	c := &ManualClock{}
	c.t.Store(start)
	return c
}

// Now implements Clock.
func (c *ManualClock) Now() int64 { return c.t.Load() }

// Advance moves the clock forward by d and returns the new time.
func (c *ManualClock) Advance(d time.Duration) int64 { return c.t.Add(int64(d)) }

// Set moves the clock to t (which should not be in the past).
func (c *ManualClock) Set(t int64) { c.t.Store(t) }

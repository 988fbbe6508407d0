package ebpf

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFollowTAI: a stale CLOCK_REALTIME - CLOCK_TAI offset (as after a
// time daemon set the kernel's TAI offset) is replaced in the program's
// configuration by the current one, and packet timestamps are POSIX time
// again.
func TestFollowTAI(t *testing.T) {
	n := newBPFNode(t)
	n.mu.Lock()
	right := n.timeOff
	n.timeOff = right + 37e9
	var c intdCfg
	_ = n.objs.CfgMap.Lookup(uint32(0), &c)
	c.TimeOffset = n.timeOff
	_ = n.objs.CfgMap.Put(uint32(0), c)
	n.followTAI()
	_ = n.objs.CfgMap.Lookup(uint32(0), &c)
	n.mu.Unlock()
	if c.TimeOffset != right || n.timeOff != right {
		t.Fatalf("time offset %d (dataplane %d), want %d", int64(c.TimeOffset), int64(n.timeOff), int64(right))
	}
	// CLOCK_TAI plus the offset is now.
	var tai unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_TAI, &tai); err != nil {
		t.Fatal(err)
	}
	if d := time.Duration(tai.Nano() + int64(right) - time.Now().UnixNano()); d > time.Millisecond || d < -time.Millisecond {
		t.Errorf("CLOCK_TAI + offset is %v from CLOCK_REALTIME", d)
	}
}

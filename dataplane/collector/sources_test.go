package collector

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// seqPacket is a v2.0 report packet of node with sequence number seq.
func seqPacket(node, seq uint32) []byte {
	b, _ := wire.AppendGroupHeader(nil, wire.GroupHeader{Version: 2, HWID: 1, Seq: seq, NodeID: node})
	b, _ = wire.AppendReport(b, &wire.ReportHeader{Type: spec.RepInnerOnly, InType: spec.InNone}, nil, nil, nil)
	return b
}

// TestSourcesGarbage sends 30,000 datagrams that decode as reports from
// random node IDs with random sequence numbers, between reports of two
// real nodes: the real nodes keep their trackers and count their real
// loss only, and a node that starts after the flood is tracked.
func TestSourcesGarbage(t *testing.T) {
	c := New(Config{})
	rng := rand.New(rand.NewPCG(1, 2))
	var seq [3]uint32
	real := func(node uint32, now int64) {
		c.HandlePacket(seqPacket(node, seq[node]), now)
		seq[node]++
	}
	real(1, 0)
	real(1, 0)
	real(2, 0)
	real(2, 0)
	seq[2] += 3 // three reports of node 2 lost
	for i := 0; i < 30000; i++ {
		b := seqPacket(rng.Uint32(), rng.Uint32()&wire.MaxReportSeq)
		// Some garbage reuses a real node's ID with a wild sequence number.
		if i%1000 == 0 {
			binary.BigEndian.PutUint32(b[4:], 1)
		}
		c.HandlePacket(b, int64(i))
		if i%100 == 0 {
			real(1, int64(i))
		}
	}
	real(2, 30000)
	for i := 0; i < 5; i++ {
		real(0, 30001) // a node added after the flood
	}
	s := c.Snapshot(0)
	if len(s.Sources) > 4096 {
		t.Fatalf("%d sources, table is 4096", len(s.Sources))
	}
	byNode := map[uint32]SourceState{}
	for _, src := range s.Sources {
		byNode[src.NodeID] = src
	}
	if src, ok := byNode[0]; !ok || src.Packets != 5 || src.Lost != 0 {
		t.Errorf("node added after the flood: %+v (tracked %v)", src, ok)
	}
	if src := byNode[2]; src.Packets != 3 || src.Lost != 3 {
		t.Errorf("node 2 = %+v, want 3 packets, 3 lost", src)
	}
	// Node 1's tracker ignores the wild numbers: out of window, not loss.
	if src := byNode[1]; src.Lost != 0 || src.OutOfWindow != 30 || src.Resets != 0 {
		t.Errorf("node 1 = %+v, want no loss, 30 out of window", src)
	}
	if s.Counters.Lost != 3 {
		t.Errorf("lost = %d, want 3", s.Counters.Lost)
	}
	if s.Counters.SourcesEvicted == 0 {
		t.Errorf("no source evicted: %+v", s.Counters)
	}
}

// TestSourcesIdle checks that a table full of established sources takes a
// new one only in place of a source silent for longer than sourceIdle.
func TestSourcesIdle(t *testing.T) {
	c := New(Config{MaxSources: 2})
	for n := uint32(1); n <= 2; n++ {
		c.HandlePacket(seqPacket(n, 0), 0)
		c.HandlePacket(seqPacket(n, 1), 0)
	}
	c.HandlePacket(seqPacket(3, 0), 1)
	if s := c.Snapshot(0); len(s.Sources) != 2 || s.Counters.SourcesOverflow == 0 {
		t.Fatalf("full of established sources: %+v", s)
	}
	c.HandlePacket(seqPacket(2, 2), sourceIdle)
	c.HandlePacket(seqPacket(3, 1), sourceIdle+2) // node 1 is idle now
	s := c.Snapshot(0)
	if len(s.Sources) != 2 || s.Sources[0].NodeID != 2 || s.Sources[1].NodeID != 3 {
		t.Errorf("sources = %+v, want nodes 2 and 3", s.Sources)
	}
}

func TestSequenceWindow(t *testing.T) {
	c := New(Config{SeqWindow: 100})
	for _, s := range []uint32{10, 11, 50, 40, 3000000, 51, 5000, 5001, 4990} {
		c.HandlePacket(seqPacket(7, s), 1)
	}
	src := c.Snapshot(0).Sources[0]
	// 12..49 lost (38), 40 reordered, 3000000 a stray, 5000 out of window
	// then continued by 5001: a reset; 4990 reordered.
	if src.Lost != 38 || src.Reordered != 2 || src.OutOfWindow != 2 || src.Resets != 1 || src.LastSeq != 5001 {
		t.Errorf("source = %+v", src)
	}
}

// TestAllow sends reports over loopback from 127.0.0.1 and 127.0.0.2 to a
// collector that accepts 127.0.0.2/32 only.
func TestAllow(t *testing.T) {
	r, err := Listen("127.0.0.1:0", 8)
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	done := make(chan error, 1)
	go func() { done <- c.Serve(r) }()
	dst := r.Addr().(*net.UDPAddr)
	send := func(src string, node uint32, n int) {
		s, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)}, dst)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := 0; i < n; i++ {
			s.Write(seqPacket(node, uint32(i)))
		}
	}
	send("127.0.0.1", 1, 5)
	send("127.0.0.2", 2, 3)
	deadline := time.Now().Add(5 * time.Second)
	for c.Snapshot(1).Counters.Packets+c.Snapshot(1).Counters.Rejected < 8 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	r.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s := c.Snapshot(0)
	if s.Counters.Rejected != 5 || s.Counters.Packets != 3 || len(s.Sources) != 1 || s.Sources[0].NodeID != 2 {
		t.Errorf("counters = %+v sources = %+v", s.Counters, s.Sources)
	}
}

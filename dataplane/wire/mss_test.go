package wire_test

import (
	"bytes"
	"testing"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/wiretest"
	"github.com/intd-project/intd/sai/spec"
)

// TestClampMSS: the MSS option of SYNs and SYN-ACKs is lowered, never
// raised, wherever it sits among the options (an odd offset too), and the
// incrementally updated checksum equals a full recomputation.
func TestClampMSS(t *testing.T) {
	nop, ws, sack := []byte{1}, []byte{3, 3, 7}, []byte{4, 2}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for _, c := range []struct {
		name    string
		flags   uint8
		opts    []byte
		clamp   uint16
		old     uint16
		changed bool
	}{
		{"SYN, MSS first", 0x02, cat(wiretest.MSSOption(1460), sack, nop, ws), 1380, 1460, true},
		{"SYN-ACK, MSS at an odd offset", 0x12, cat(nop, wiretest.MSSOption(8960), ws), 1380, 8960, true},
		{"MSS after SACK-permitted and window scale", 0x02, cat(sack, ws, wiretest.MSSOption(65495)), 1220, 65495, true},
		{"MSS already small enough", 0x02, wiretest.MSSOption(536), 1380, 536, false},
		{"no MSS option", 0x02, cat(sack, nop, ws), 1380, 0, false},
		{"no room: MSS 0 leaves it", 0x02, wiretest.MSSOption(1460), 0, 0, false},
		{"not a SYN", 0x10, wiretest.MSSOption(1460), 1380, 0, false},
		{"bad option length stops the walk", 0x02, cat([]byte{8, 1}, wiretest.MSSOption(1460)), 1380, 0, false},
		{"end of options before MSS", 0x02, cat([]byte{0, 0, 0, 0}, wiretest.MSSOption(1460)), 1380, 0, false},
	} {
		for _, src := range []string{"10.0.1.1", "2001:db8:1::1"} {
			dst := "10.0.2.1"
			if src[0] == '2' {
				dst = "2001:db8:2::1"
			}
			f := wiretest.SYNFrame(src, dst, 1234, 80, 0, c.flags, c.opts)
			var p wire.Packet
			if err := (&wire.Parser{}).Parse(f, &p); err != nil {
				t.Fatal(err)
			}
			orig := bytes.Clone(f)
			old, changed := wire.ClampMSS(f, p.L4, c.clamp)
			if old != c.old || changed != c.changed {
				t.Errorf("%s over %s: got %d %v, want %d %v", c.name, src, old, changed, c.old, c.changed)
			}
			if !changed {
				if !bytes.Equal(f, orig) {
					t.Errorf("%s over %s: frame changed", c.name, src)
				}
				continue
			}
			if !wire.VerifyL4Checksum(f, &p) {
				t.Errorf("%s over %s: checksum wrong after the update", c.name, src)
			}
			want := bytes.Clone(f)
			wire.SetL4Checksum(want, &p, true)
			if !bytes.Equal(f, want) {
				t.Errorf("%s over %s: incremental checksum %x, recomputed %x", c.name, src, f[p.L4+16:p.L4+18], want[p.L4+16:p.L4+18])
			}
			i := bytes.Index(f[p.L4+20:], []byte{2, 4})
			if got := uint16(f[p.L4+20+i+2])<<8 | uint16(f[p.L4+20+i+3]); got != c.clamp {
				t.Errorf("%s over %s: MSS %d, want %d", c.name, src, got, c.clamp)
			}
		}
	}
}

// TestTCPSourceOverhead: the INT a source adds to a full-sized TCP
// segment, by mode and marking, and the MSS that leaves room for it.
func TestTCPSourceOverhead(t *testing.T) {
	dscp := wire.SourceOptions{Encap: spec.EncapDSCP, DSCP: 0x17, Mask: 0x3f}
	udp := wire.SourceOptions{Encap: spec.EncapUDPPort, UDPPort: 5000, NPT: spec.NPTUDPPort}
	probe := wire.SourceOptions{Encap: spec.EncapProbeMarker, ProbeMarker: 1}
	for _, c := range []struct {
		typ        spec.HeaderType
		hops, hopW int
		opt        wire.SourceOptions
		want       int
	}{
		{spec.TypeMD, 8, 4, dscp, 4 + 12 + 8*4*4},
		{spec.TypeMD, 8, 4, udp, 8 + 4 + 12 + 8*4*4},
		{spec.TypeMD, 3, 1, probe, 8 + 4 + 12 + 3*4},
		{spec.TypeMX, 8, 4, dscp, 4 + 12},
		{spec.TypeMD, 8, 4, wire.SourceOptions{}, 0},
	} {
		if got := wire.TCPSourceOverhead(c.typ, c.hops, c.hopW, &c.opt); got != c.want {
			t.Errorf("%v %d hops of %d words, %v: %d, want %d", c.typ, c.hops, c.hopW, c.opt.Encap, got, c.want)
		}
	}
	if got := wire.MSSFor(1500, 4, 144); got != 1500-20-20-144 {
		t.Errorf("MSSFor IPv4: %d", got)
	}
	if got := wire.MSSFor(1500, 6, 144); got != 1500-40-20-144 {
		t.Errorf("MSSFor IPv6: %d", got)
	}
	if got := wire.MSSFor(100, 6, 144); got != 0 {
		t.Errorf("MSSFor without room: %d", got)
	}
}

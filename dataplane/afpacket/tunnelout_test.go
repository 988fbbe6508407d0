//go:build linux

package afpacket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
)

// TestTunnelOut sends a VXLAN-GPE super-packet carrying 16 bytes between
// the tunnel header and the inner TCP packet through a TunnelOut on one
// end of a veth pair and reads it at the other with a Port: whole while
// the port's UDP tunnel segmentation is on (TunnelOut turns it on, from
// off), and when it is off as MSS-sized frames with the outer headers
// and the 16 bytes on each, valid TCP checksums and consecutive
// sequence numbers. Close removes the TAP and turns the feature off
// again.
func TestTunnelOut(t *testing.T) {
	ns, h := testNS(t)
	addVeth(t, h, "va", "vb")
	const mss, segs, intLen = 1400, 20, 16
	inner, vh := superPacket(segs*mss, mss)
	var out *TunnelOut
	var in *Port
	var openErr error
	inNS(t, ns, func() (err error) {
		// Off to begin with (a veth has them on), so that Open must turn
		// them on and Close off again.
		if err := ethtool.SetFeatures("va", func(n string) bool { return tunnelFeatures[n] }, false); err != nil {
			return err
		}
		if out, openErr = OpenTunnelOut("va"); openErr != nil {
			return nil
		}
		in, err = Open("vb", PortConfig{Promiscuous: true})
		return err
	})
	if errors.Is(openErr, ErrNoTunnelGSO) {
		t.Skip(openErr)
	} else if openErr != nil {
		t.Fatal(openErr)
	}
	defer in.Close()
	frame, th := gpeFrame(inner, vh, intLen)

	// read reads frames at vb for a while, UDP to 4790 only.
	read := func() [][]byte {
		var got [][]byte
		for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
			n, err := in.Read()
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if f := in.Frame(i); len(f) > 42 && f[23] == 17 && binary.BigEndian.Uint16(f[36:]) == 4790 {
					got = append(got, bytes.Clone(f))
				}
			}
			if n == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		return got
	}
	if err := out.Send(frame, th); err != nil {
		t.Fatal(err)
	}
	if got := read(); len(got) != 1 || !bytes.Equal(got[0], frame) {
		t.Fatalf("tunnel segmentation on: %d frames, want the %d-byte super-packet whole", len(got), len(frame))
	}

	inNS(t, ns, func() error {
		return ethtool.SetFeatures("va", func(n string) bool { return tunnelFeatures[n] }, false)
	})
	if err := out.Send(frame, th); err != nil {
		t.Fatal(err)
	}
	got := read()
	if len(got) != segs {
		t.Fatalf("tunnel segmentation off: %d frames, want %d", len(got), segs)
	}
	hl := int(th.InnerNetwork) + 20 + 32 // inner IPv4 and TCP with 12 bytes of options
	for i, f := range got {
		if len(f) != hl+mss || !bytes.Equal(f[50:50+intLen], frame[50:50+intLen]) ||
			int(binary.BigEndian.Uint16(f[38:])) != len(f)-34 || int(binary.BigEndian.Uint16(f[16:])) != len(f)-14 {
			t.Fatalf("segment %d: %d bytes, outer lengths or INT bytes wrong: % x", i, len(f), f[:hl])
		}
		ip := f[th.InnerNetwork:]
		tcp := ip[20:]
		if seq, first := binary.BigEndian.Uint32(tcp[4:]), binary.BigEndian.Uint32(frame[int(th.InnerNetwork)+24:]); seq != first+uint32(i*mss) {
			t.Errorf("segment %d: sequence number %d, want %d", i, seq, first+uint32(i*mss))
		}
		if sum16(tcp, uint32(sum16(ip[12:20], 0))+6+uint32(len(tcp))) != 0xffff {
			t.Errorf("segment %d: TCP checksum wrong", i)
		}
		if !bytes.Equal(tcp[32:], inner[14+20+32+i*mss:14+20+32+(i+1)*mss]) {
			t.Errorf("segment %d: payload differs", i)
		}
	}

	inNS(t, ns, func() error {
		if err := out.Close(); err != nil {
			return err
		}
		if _, err := net.InterfaceByName(out.tap); err == nil {
			t.Errorf("TAP %s still there after Close", out.tap)
		}
		f, err := ethtool.ActiveFeatures("va")
		if err == nil && (f["tx-udp_tnl-segmentation"] || f["tx-udp_tnl-csum-segmentation"]) {
			t.Errorf("va's UDP tunnel segmentation still on after Close (before: %v)", out.was)
		}
		return err
	})
}

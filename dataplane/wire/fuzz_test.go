package wire

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/intd-project/intd/dataplane/wire/pcap"
	"github.com/intd-project/intd/sai/spec"
)

// Fuzz targets: every decoder must return an error on malformed input and
// never panic or read out of bounds. Seeds are the spec examples and the
// peer captures.

func specSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for _, s := range []string{exMDOverTCP, exMXOverTCP, exMDNewUDPBeforeTCP, exMXBeforeIPsec, exMDBetweenUDPAndPayload,
		exMXSourceInsertedDS, exMDOverGRE, exMXOverGRE} {
		out = append(out, hx(t, s))
	}
	return out
}

func captureSeeds(f *testing.F) [][]byte {
	var out [][]byte
	for _, name := range []string{"host-int-int05-over-udp-dscp.pcap", "host-int-int05-udp-extension.pcap",
		"host-int-report-int05-over-udp-dscp.pcap", "int-host-reporter-tr05-flow-reports.pcap"} {
		data, err := os.ReadFile(capturesDir + "/" + name)
		if err != nil {
			continue
		}
		r, err := pcap.NewReader(bytes.NewReader(data))
		if err != nil {
			continue
		}
		for {
			p, err := r.Next()
			if err != nil {
				break
			}
			out = append(out, bytes.Clone(p.Data))
		}
	}
	return out
}

var fuzzParser = Parser{DSCP: exINTDSCP, DSCPMask: 0x3f, UDPPort: exINTPort, ProbeMarker: 0x1122334455667788,
	GREProto: exGREProto, VXLANGPEPort: spec.PortVXLANGPE, GenevePort: spec.PortGeneve}

func FuzzParse(f *testing.F) {
	for _, s := range specSeeds(f) {
		f.Add(s, false)
	}
	f.Add(hx(f, exMDOverGRECE), true)
	for _, s := range captureSeeds(f) {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, eth bool) {
		var p Packet
		var err error
		if eth {
			err = fuzzParser.Parse(b, &p)
		} else {
			err = fuzzParser.ParseIP(b, &p)
		}
		if err != nil || !p.HasINT() {
			return
		}
		if p.Next > len(b) || p.INT+p.INTLen != p.Next {
			t.Fatalf("offsets out of range: %+v len %d", p, len(b))
		}
		if p.INTType == spec.TypeMD {
			h, s, err := DecodeMD(b[p.INT:p.Next], -1)
			if err == nil {
				var m HopMetadata
				for i := 0; i < s.Count(); i++ {
					if err := DecodeHop(s.Hop(i), h.Instructions, &m); err != nil {
						t.Fatal(err)
					}
				}
			}
		} else {
			_, _ = DecodeMXHeader(b[p.INT:])
		}
		// In-place edits on whatever parsed must not panic either.
		pkt := append(bytes.Clone(b), make([]byte, 256)...)[:len(b)]
		q := p
		m := HopMetadata{NodeID: 1, Valid: 0xffff}
		pushed, err := PushHop(pkt, &q, &m, PushOptions{UseChecksumComplement: true})
		if err == nil {
			if err := fuzzParserFor(eth, pushed, &q); err != nil || !q.HasINT() {
				t.Fatalf("packet no longer parses after PushHop: %v", err)
			}
		}
		q = p
		_, _ = Strip(bytes.Clone(b), &q, SinkOptions{RestoreDSCP: true})
	})
}

func fuzzParserFor(eth bool, b []byte, p *Packet) error {
	if eth {
		return fuzzParser.Parse(b, p)
	}
	return fuzzParser.ParseIP(b, p)
}

func FuzzDecodeMD(f *testing.F) {
	f.Add(hx(f, exMDSourceOnlyDS), 8)
	f.Add(hx(f, exMDOverGPE)[12:], 0)
	f.Fuzz(func(t *testing.T, b []byte, sourceOnly int) {
		h, s, err := DecodeMD(b, sourceOnly%64)
		if err != nil {
			return
		}
		var m HopMetadata
		for i := 0; i < s.Count(); i++ {
			if err := DecodeHop(s.Hop(i), h.Instructions, &m); err != nil {
				t.Fatal(err)
			}
			// Re-encoding a decoded hop gives the same bytes.
			out := make([]byte, len(s.Hop(i)))
			n, err := PutHop(out, h.Instructions, int(h.HopML)-h.Instructions.Words(), &m)
			if err != nil || n != len(out) {
				t.Fatalf("re-encode: %v %d", err, n)
			}
			// Reserved bits and the checksum complement carry no value to keep.
			if inst := h.Instructions; inst&(spec.InstChecksumComplement|0x007e) == 0 && !bytes.Equal(out, s.Hop(i)) {
				t.Fatalf("round trip\n% x\n% x", out, s.Hop(i))
			}
		}
	})
}

func FuzzReport(f *testing.F) {
	t := &testing.T{}
	f.Add(append(hx(t, exGroup), hx(t, exReportBaseline)...))
	f.Add(append(hx(t, exGroup), hx(t, exReportDSTLV)...))
	f.Add(append(hx(t, exGroup), hx(t, exReportEmbeddedMD)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, rr, err := NewReportReader(b)
		if err != nil {
			return
		}
		var r Report
		var md ReportMetadata
		for rr.Next(&r) {
			if r.Type == spec.RepINT {
				_, _ = r.Baseline(&md)
			}
			if r.InType == spec.InTLV {
				tr := NewTLVReader(r.Inner)
				var tlv TLV
				for tr.Next(&tlv) {
				}
			}
			var p Packet
			_ = (&Parser{UDPPort: exINTPort, AllowTruncated: true}).ParseIP(r.Inner, &p)
		}
	})
}

func FuzzINT05(f *testing.F) {
	for _, s := range captureSeeds(f) {
		if len(s) > 42 {
			f.Add(s[42:], false)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, noTail bool) {
		d, err := DecodeINT05(b, INT05Options{NoTail: noTail})
		if err != nil {
			return
		}
		if d.Len > len(b) {
			t.Fatal("length beyond input")
		}
		var m INT05HopMetadata
		for i := 0; i < d.Hops(); i++ {
			d.DecodeINT05Hop(i, &m)
		}
	})
}

func FuzzTR05(f *testing.F) {
	for _, s := range captureSeeds(f) {
		if len(s) > 42 {
			f.Add(s[42:])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeTR05(b)
		if err != nil {
			return
		}
		var p Packet
		if r.Header.NextProto == spec.TR05IPv4 {
			_ = (&Parser{AllowTruncated: true}).ParseIP(r.Inner, &p)
		} else {
			_ = (&Parser{AllowTruncated: true}).Parse(r.Inner, &p)
		}
	})
}

func FuzzLegacy2016(f *testing.F) {
	b := []byte{1, 0, 4, 3, 0, 1, 16, 1, 0x10, 0, 0, 0}
	f.Add(binary.BigEndian.AppendUint32(b, 0x80000001))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Decode2016GPE(b, func(g *Legacy2016GPE) {
			for i := 0; i < g.Hops(); i++ {
				_ = g.Hop(i).BOS()
			}
		})
		if s, err := Decode2016Geneve(b); err == nil {
			for i := 0; i < s.Hops(); i++ {
				_ = s.Hop(i).Value(0, true)
			}
		}
	})
}

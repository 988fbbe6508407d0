package pcap

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func classic(order binary.AppendByteOrder, magic uint32, frac uint32) []byte {
	var b []byte
	b = order.AppendUint32(b, magic)
	b = order.AppendUint16(b, 2)
	b = order.AppendUint16(b, 4)
	b = order.AppendUint32(b, 0)
	b = order.AppendUint32(b, 0)
	b = order.AppendUint32(b, 65535)
	b = order.AppendUint32(b, LinkTypeEthernet)
	b = order.AppendUint32(b, 1700000000)
	b = order.AppendUint32(b, frac)
	b = order.AppendUint32(b, 3)
	b = order.AppendUint32(b, 60)
	return append(b, 0xaa, 0xbb, 0xcc)
}

func TestClassicAllMagics(t *testing.T) {
	for _, c := range []struct {
		order binary.AppendByteOrder
		magic uint32
		want  time.Duration
	}{
		{binary.LittleEndian, 0xa1b2c3d4, 5 * time.Microsecond},
		{binary.BigEndian, 0xa1b2c3d4, 5 * time.Microsecond},
		{binary.LittleEndian, 0xa1b23c4d, 5},
		{binary.BigEndian, 0xa1b23c4d, 5},
	} {
		r, err := NewReader(bytes.NewReader(classic(c.order, c.magic, 5)))
		if err != nil {
			t.Fatal(err)
		}
		p, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p.Data, []byte{0xaa, 0xbb, 0xcc}) || p.OrigLen != 60 || p.LinkType != LinkTypeEthernet {
			t.Errorf("%v %#x: got %+v", c.order, c.magic, p)
		}
		if got := p.Time.Sub(time.Unix(1700000000, 0)); got != c.want {
			t.Errorf("%v %#x: time offset %v, want %v", c.order, c.magic, got, c.want)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Errorf("want EOF, got %v", err)
		}
	}
}

func TestPeerCapturesArePcapng(t *testing.T) {
	dir := "../../../../shared/captures"
	files, _ := filepath.Glob(filepath.Join(dir, "*.pcap"))
	if len(files) == 0 {
		t.Skipf("no captures in %s (shared/ must be a sibling of the repo)", dir)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		n := 0
		for {
			p, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if p.LinkType != LinkTypeEthernet || len(p.Data) < 14 || p.Time.Year() < 2020 {
				t.Fatalf("%s: odd packet %+v", f, p)
			}
			n++
		}
		if n == 0 {
			t.Errorf("%s: no packets", f)
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add(classic(binary.LittleEndian, 0xa1b2c3d4, 1))
	f.Add(classic(binary.BigEndian, 0xa1b23c4d, 1))
	if data, err := os.ReadFile("../../../../shared/captures/int-host-reporter-tr05-flow-reports.pcap"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		for i := 0; i < 100; i++ {
			if _, err := r.Next(); err != nil {
				return
			}
		}
	})
}

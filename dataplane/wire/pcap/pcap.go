// Package pcap reads packet captures: classic pcap files (either byte
// order, microsecond or nanosecond timestamps) and pcapng files (section,
// interface description, enhanced and simple packet blocks). It is meant
// for tests and offline decoding, not for capture.
package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// LinkTypeEthernet is LINKTYPE_ETHERNET.
const LinkTypeEthernet = 1

// Errors.
var (
	ErrFormat    = errors.New("pcap: not a pcap or pcapng file")
	ErrTruncated = errors.New("pcap: truncated record")
	ErrTooLarge  = errors.New("pcap: record too large")
)

const maxRecord = 1 << 20

// Packet is one captured frame. Data is valid until the next call to Next.
type Packet struct {
	Time     time.Time
	LinkType uint16
	OrigLen  int
	Data     []byte
}

// Reader reads packets from a capture.
type Reader struct {
	r     *bufio.Reader
	ng    bool
	order binary.ByteOrder
	nanos bool       // classic: nanosecond timestamps
	link  uint16     // classic: file link type
	ifs   []ifaceDef // pcapng: interfaces of the current section
	buf   []byte
}

type ifaceDef struct {
	link   uint16
	tsUnit time.Duration // duration of one timestamp tick
}

// NewReader reads the file header of a capture.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, ErrFormat
	}
	rd := &Reader{r: br}
	switch binary.LittleEndian.Uint32(magic) {
	case 0x0a0d0d0a:
		rd.ng = true
		if err := rd.readSHB(); err != nil {
			return nil, err
		}
		return rd, nil
	}
	var hdr [24]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, ErrFormat
	}
	switch {
	case binary.LittleEndian.Uint32(hdr[:]) == 0xa1b2c3d4:
		rd.order = binary.LittleEndian
	case binary.BigEndian.Uint32(hdr[:]) == 0xa1b2c3d4:
		rd.order = binary.BigEndian
	case binary.LittleEndian.Uint32(hdr[:]) == 0xa1b23c4d:
		rd.order, rd.nanos = binary.LittleEndian, true
	case binary.BigEndian.Uint32(hdr[:]) == 0xa1b23c4d:
		rd.order, rd.nanos = binary.BigEndian, true
	default:
		return nil, ErrFormat
	}
	rd.link = uint16(rd.order.Uint32(hdr[20:]))
	return rd, nil
}

// Next returns the next packet, or io.EOF at the end of the capture.
func (rd *Reader) Next() (Packet, error) {
	if rd.ng {
		return rd.nextNG()
	}
	var h [16]byte
	if _, err := io.ReadFull(rd.r, h[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return Packet{}, ErrTruncated
		}
		return Packet{}, err
	}
	sec, frac := rd.order.Uint32(h[0:]), rd.order.Uint32(h[4:])
	incl, orig := rd.order.Uint32(h[8:]), rd.order.Uint32(h[12:])
	if incl > maxRecord {
		return Packet{}, ErrTooLarge
	}
	data, err := rd.read(int(incl))
	if err != nil {
		return Packet{}, err
	}
	ns := int64(frac)
	if !rd.nanos {
		ns *= 1000
	}
	return Packet{Time: time.Unix(int64(sec), ns).UTC(), LinkType: rd.link, OrigLen: int(orig), Data: data}, nil
}

func (rd *Reader) read(n int) ([]byte, error) {
	if cap(rd.buf) < n {
		rd.buf = make([]byte, n)
	}
	b := rd.buf[:n]
	if _, err := io.ReadFull(rd.r, b); err != nil {
		return nil, ErrTruncated
	}
	return b, nil
}

// readSHB reads a section header block and sets the section's byte order.
func (rd *Reader) readSHB() error {
	var h [12]byte
	if _, err := io.ReadFull(rd.r, h[:]); err != nil {
		return ErrFormat
	}
	switch binary.LittleEndian.Uint32(h[8:]) {
	case 0x1a2b3c4d:
		rd.order = binary.LittleEndian
	case 0x4d3c2b1a:
		rd.order = binary.BigEndian
	default:
		return ErrFormat
	}
	total := rd.order.Uint32(h[4:])
	if total < 28 || total > maxRecord || total%4 != 0 {
		return ErrFormat
	}
	if _, err := rd.read(int(total) - 12); err != nil {
		return err
	}
	rd.ifs = rd.ifs[:0]
	return nil
}

func (rd *Reader) nextNG() (Packet, error) {
	for {
		head, err := rd.r.Peek(8)
		if err != nil {
			if len(head) == 0 {
				return Packet{}, io.EOF
			}
			return Packet{}, ErrTruncated
		}
		typ := rd.order.Uint32(head)
		if typ == 0x0a0d0d0a {
			if err := rd.readSHB(); err != nil {
				return Packet{}, err
			}
			continue
		}
		total := rd.order.Uint32(head[4:])
		if total < 12 || total%4 != 0 {
			return Packet{}, fmt.Errorf("pcap: block type %#x: bad length %d", typ, total)
		}
		if total > maxRecord {
			return Packet{}, ErrTooLarge
		}
		blk, err := rd.read(int(total))
		if err != nil {
			return Packet{}, err
		}
		body := blk[8 : total-4]
		switch typ {
		case 1: // interface description
			if len(body) < 8 {
				return Packet{}, ErrTruncated
			}
			rd.ifs = append(rd.ifs, ifaceDef{link: rd.order.Uint16(body), tsUnit: tsUnit(body[8:], rd.order)})
		case 6: // enhanced packet
			if len(body) < 20 {
				return Packet{}, ErrTruncated
			}
			id := rd.order.Uint32(body)
			if int(id) >= len(rd.ifs) {
				return Packet{}, fmt.Errorf("pcap: packet on undeclared interface %d", id)
			}
			ts := uint64(rd.order.Uint32(body[4:]))<<32 | uint64(rd.order.Uint32(body[8:]))
			capLen, orig := rd.order.Uint32(body[12:]), rd.order.Uint32(body[16:])
			if uint64(capLen) > uint64(len(body)-20) {
				return Packet{}, ErrTruncated
			}
			ifc := rd.ifs[id]
			t := time.Unix(0, 0).Add(time.Duration(ts) * ifc.tsUnit).UTC()
			return Packet{Time: t, LinkType: ifc.link, OrigLen: int(orig), Data: body[20 : 20+capLen]}, nil
		case 3: // simple packet
			if len(body) < 4 || len(rd.ifs) == 0 {
				return Packet{}, ErrTruncated
			}
			orig := rd.order.Uint32(body)
			n := min(int(orig), len(body)-4)
			return Packet{LinkType: rd.ifs[0].link, OrigLen: int(orig), Data: body[4 : 4+n]}, nil
		}
	}
}

// tsUnit reads the if_tsresol option (default microseconds).
func tsUnit(opts []byte, order binary.ByteOrder) time.Duration {
	for len(opts) >= 4 {
		code, l := order.Uint16(opts), int(order.Uint16(opts[2:]))
		if code == 0 || 4+l > len(opts) {
			break
		}
		if code == 9 && l >= 1 {
			v := opts[4]
			if v&0x80 != 0 || v > 9 {
				break // base-2 or sub-nanosecond: fall back to nanoseconds below
			}
			d := time.Second
			for i := uint8(0); i < v; i++ {
				d /= 10
			}
			return d
		}
		opts = opts[4+(l+3)&^3:]
	}
	return time.Microsecond
}

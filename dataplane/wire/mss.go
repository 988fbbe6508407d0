package wire

import "encoding/binary"

// TCP option kinds and flags used by ClampMSS.
const (
	tcpOptEnd = 0
	tcpOptNOP = 1
	tcpOptMSS = 2
	tcpFlagSY = 0x02
)

// ClampMSS lowers the MSS option of the TCP SYN (or SYN-ACK) whose header
// starts at pkt[l4:] to mss when it is larger, and updates the TCP
// checksum incrementally (RFC 1624; an option at an odd offset from the
// header counts byte-swapped). It returns the option's value before and
// whether it changed anything: nothing changes for other segments, for a
// SYN without an MSS option, for options that do not parse (the walk stops
// at the end-of-options kind or a length below 2 or past the header), or
// when mss is 0 (MSSFor found no room).
func ClampMSS(pkt []byte, l4 int, mss uint16) (uint16, bool) {
	if mss == 0 || l4 < 0 || len(pkt) < l4+TCPMinLen || pkt[l4+13]&tcpFlagSY == 0 {
		return 0, false
	}
	end := l4 + int(pkt[l4+12]>>4)*4
	if end > len(pkt) {
		return 0, false
	}
	for i := l4 + TCPMinLen; i < end; {
		switch pkt[i] {
		case tcpOptEnd:
			return 0, false
		case tcpOptNOP:
			i++
			continue
		}
		if i+1 >= end {
			return 0, false
		}
		n := int(pkt[i+1])
		if n < 2 || i+n > end {
			return 0, false
		}
		if pkt[i] != tcpOptMSS || n != 4 {
			i += n
			continue
		}
		at := i + 2
		old := binary.BigEndian.Uint16(pkt[at:])
		if old <= mss {
			return old, false
		}
		binary.BigEndian.PutUint16(pkt[at:], mss)
		o, w := old, mss
		if (at-l4)&1 != 0 {
			o, w = o<<8|o>>8, w<<8|w>>8
		}
		ck := l4 + 16
		binary.BigEndian.PutUint16(pkt[ck:], UpdateChecksum(binary.BigEndian.Uint16(pkt[ck:]), o, w))
		return old, true
	}
	return 0, false
}

// MSSFor is the largest MSS whose segments, with overhead bytes of INT
// added, fit an IP MTU of mtu: mtu minus the fixed IP header (20 bytes for
// IPv4, 40 for IPv6), the TCP header without options (20) and overhead. 0
// when nothing fits.
func MSSFor(mtu int, ipVersion uint8, overhead int) uint16 {
	ip := IPv4MinLen
	if ipVersion == 6 {
		ip = IPv6Len
	}
	n := mtu - ip - TCPMinLen - overhead
	if n <= 0 {
		return 0
	}
	return uint16(min(n, 0xffff))
}

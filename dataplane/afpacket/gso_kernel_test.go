//go:build linux

package afpacket

import (
	"bytes"
	"encoding/binary"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestKernelGSO reads what the kernel's own TCP (TSO) and UDP (USO,
// UDP_SEGMENT) hand a veth with default offloads, through a Port at the
// peer, and checks that Segments turns the super-packets into valid
// MTU-sized frames carrying exactly the bytes sent.
func TestKernelGSO(t *testing.T) {
	ns1, h1 := testNS(t)
	ns2, h2 := testNS(t)
	if err := h1.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "va", MTU: 1500}, PeerName: "vb",
		PeerNamespace: netlink.NsFd(ns2)}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		h    *netlink.Handle
		name string
		addr string
	}{{h1, "va", "10.9.0.1/24"}, {h2, "vb", "10.9.0.2/24"}} {
		l, err := x.h.LinkByName(x.name)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := netlink.ParseAddr(x.addr)
		if err := x.h.AddrAdd(l, a); err != nil {
			t.Fatal(err)
		}
		if err := x.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	var port *Port
	var ln net.Listener
	var usock *net.UDPConn
	inNS(t, ns2, func() (err error) {
		if port, err = Open("vb", PortConfig{}); err != nil {
			return err
		}
		if usock, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 9, 0, 2), Port: 5556}); err != nil {
			return err
		}
		ln, err = net.Listen("tcp4", "10.9.0.2:5555")
		return err
	})
	defer port.Close()
	defer ln.Close()
	defer usock.Close()

	data := payloadBytes(1 << 20)
	recvd := acceptAll(ln)
	var c net.Conn
	var ufd int
	inNS(t, ns1, func() (err error) {
		if ufd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		c, err = (&net.Dialer{Timeout: 10 * time.Second}).Dial("tcp4", "10.9.0.2:5555")
		return err
	})
	defer unix.Close(ufd)
	go func() {
		c.SetDeadline(time.Now().Add(20 * time.Second))
		c.Write(data)
		c.Close()
	}()
	// One USO send: 20 datagrams of 1000 bytes in one super-packet.
	udpData := payloadBytes(20000)
	if err := unix.SetsockoptInt(ufd, unix.IPPROTO_UDP, unix.UDP_SEGMENT, 1000); err != nil {
		t.Fatal(err)
	}
	if err := unix.Sendto(ufd, udpData, 0, &unix.SockaddrInet4{Port: 5556, Addr: [4]byte{10, 9, 0, 2}}); err != nil {
		t.Fatal(err)
	}

	var (
		isn      uint32
		synSeen  bool
		chunks   = map[uint32][]byte{}
		udpGot   []byte
		udpSegs  int
		gso      = map[uint8]int{}
		segments int
		bad      int
	)
	emit := func(s []byte) {
		segments++
		hd, ok := parseHeaders(s)
		if len(s) < 14 || binary.BigEndian.Uint16(s[12:]) != 0x0800 {
			return // ARP, IPv6 router solicitations
		}
		if !ok || len(s) > 1514 {
			bad++
			t.Errorf("segment of %d bytes does not parse", len(s))
			return
		}
		ip := s[hd.l3:]
		if refFold(refSum(ip[:20], 0)) != 0xffff || int(binary.BigEndian.Uint16(ip[2:])) != len(s)-hd.l3 ||
			refFold(refSum(s[hd.l4:], pseudo(s, hd.l3, hd.l4, hd.proto, len(s)-hd.l4))) != 0xffff {
			bad++
			t.Errorf("segment with a bad length or checksum: %x", s[:min(len(s), 80)])
			return
		}
		l4 := s[hd.l4:]
		switch {
		case hd.proto == 6 && binary.BigEndian.Uint16(l4[2:]) == 5555:
			seq := binary.BigEndian.Uint32(l4[4:])
			if l4[13]&0x02 != 0 {
				isn, synSeen = seq+1, true
			}
			if p := l4[int(l4[12]>>4)*4:]; len(p) > 0 {
				chunks[seq] = bytes.Clone(p)
			}
		case hd.proto == 17 && binary.BigEndian.Uint16(l4[2:]) == 5556:
			udpSegs++
			udpGot = append(udpGot, l4[8:]...)
		}
	}
	handle := func(n int) {
		for i := 0; i < n; i++ {
			if gt := port.Vnet(i).GSOType; gt != GSONone {
				gso[gt]++
			}
			port.Segments(i, emit)
		}
	}
	var got []byte
	deadline := time.Now().Add(20 * time.Second)
	for got == nil && time.Now().Before(deadline) {
		n, err := port.Read()
		if err != nil {
			t.Fatal(err)
		}
		handle(n)
		if n == 0 {
			select {
			case got = <-recvd:
			case <-time.After(time.Millisecond):
			}
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("listener received %d bytes of %d", len(got), len(data))
	}
	// Drain what is left.
	for n, _ := port.Read(); n > 0; n, _ = port.Read() {
		handle(n)
	}
	st := port.Stats()
	t.Logf("GSO super-packets by type %v, %d frames after segmentation, stats %+v", gso, segments, st)
	if gso[GSOTCPv4] == 0 || gso[GSOUDPL4] == 0 {
		t.Errorf("the kernel sent no TCP or UDP super-packet: %v", gso)
	}
	if st.RxGSOErrors != 0 || st.RxOversize != 0 || bad != 0 {
		t.Errorf("%d GSO errors, %d oversized, %d bad segments", st.RxGSOErrors, st.RxOversize, bad)
	}
	if udpSegs != 20 || !bytes.Equal(udpGot, udpData) {
		t.Errorf("USO: %d datagrams, %d bytes", udpSegs, len(udpGot))
	}
	if !synSeen {
		t.Fatal("no SYN seen")
	}
	seqs := make([]uint32, 0, len(chunks))
	for s := range chunks {
		seqs = append(seqs, s-isn)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	var stream []byte
	for _, s := range seqs {
		p := chunks[s+isn]
		if int(s) > len(stream) {
			t.Fatalf("hole in the stream at %d", len(stream))
		}
		if end := int(s) + len(p); end > len(stream) {
			stream = append(stream, p[len(stream)-int(s):]...)
		}
	}
	if !bytes.Equal(stream, data) {
		t.Errorf("segments carry %d bytes, not the %d sent", len(stream), len(data))
	}
}

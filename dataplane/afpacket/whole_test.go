//go:build linux

package afpacket

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestWholeSuperPackets sends 8 MiB over TCP from h1 to h2 through the
// dataplane, hosts with their default offloads (TSO on the veths): with
// nothing watched, the switch must forward the super-packets whole (none
// segmented in userspace) and every byte must arrive as sent.
func TestWholeSuperPackets(t *testing.T) {
	r, _ := testNS(t)
	h1, _ := testNS(t)
	h2, _ := testNS(t)
	link(t, h1, "e1", "10.1.0.1/24", r, "s1", "10.1.0.254/24")
	link(t, h2, "e2", "10.2.0.1/24", r, "s2", "10.2.0.254/24")
	route(t, h1, "0.0.0.0/0", "10.1.0.254")
	route(t, h2, "0.0.0.0/0", "10.2.0.254")
	d, _ := startDataplane(t, r, "s1", "s2")

	var ln net.Listener
	inNS(t, h2, func() (err error) {
		ln, err = net.Listen("tcp4", "10.2.0.1:5555")
		return err
	})
	defer ln.Close()
	data := payloadBytes(8 << 20)
	recvd := acceptAll(ln)
	var c net.Conn
	inNS(t, h1, func() (err error) {
		c, err = net.DialTimeout("tcp4", "10.2.0.1:5555", 5*time.Second)
		return err
	})
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	c.Close()
	got := <-recvd
	st := d.Node().Stats()
	t.Logf("s1 %+v", st[0])
	if !bytes.Equal(got, data) {
		t.Fatalf("received %d bytes, want the %d sent, byte for byte", len(got), len(data))
	}
	if st[0].RxWhole == 0 || st[0].RxSegments != 0 || st[0].RxGSOErrors != 0 {
		t.Errorf("s1: %d super-packets, %d forwarded whole, %d segments made, %d errors; want all whole",
			st[0].RxGSO, st[0].RxWhole, st[0].RxSegments, st[0].RxGSOErrors)
	}
	if st[1].TxErrors != 0 {
		t.Errorf("s2: %d frames refused", st[1].TxErrors)
	}
}

// acceptAll accepts one connection on ln and sends what it read until
// EOF (nil if none came), waiting at most 20 s.
func acceptAll(ln net.Listener) <-chan []byte {
	recvd := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			recvd <- nil
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		b, _ := io.ReadAll(c)
		recvd <- b
	}()
	return recvd
}

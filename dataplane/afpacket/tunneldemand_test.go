//go:build linux

package afpacket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/intd-project/intd/dataplane/internal/ethtool"
	"github.com/intd-project/intd/dataplane/soft"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai/spec"
)

// hostTunnelState describes, in the namespace of h, what session tunnel
// output puts on the host: every link but the ports' peers with its kind,
// state and master-less tc state (qdiscs other than the default, ingress
// and egress filters with their redirect targets), and the ports' UDP
// tunnel segmentation features.
func hostTunnelState(t *testing.T, ns netns.NsHandle, h *netlink.Handle, ports ...string) string {
	t.Helper()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		a := l.Attrs()
		s := fmt.Sprintf("%s(%s,up=%v)", a.Name, l.Type(), a.Flags&(1<<0) != 0)
		qs, err := h.QdiscList(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if q.Type() == "clsact" || q.Type() == "ingress" {
				s += " qdisc " + q.Type()
			}
		}
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, err := h.FilterList(l, parent)
			if err != nil {
				continue // no clsact: no filters
			}
			for _, f := range fs {
				s += fmt.Sprintf(" filter %s", f.Type())
				if u, ok := f.(*netlink.U32); ok {
					for _, act := range u.Actions {
						if m, ok := act.(*netlink.MirredAction); ok {
							to, _ := h.LinkByIndex(m.Ifindex)
							if to != nil {
								s += " redirect to " + to.Attrs().Name
							}
						}
					}
				}
			}
		}
		out = append(out, s)
	}
	slices.Sort(out)
	inNS(t, ns, func() error {
		for _, p := range ports {
			f, err := ethtool.ActiveFeatures(p)
			if err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("%s tx-udp_tnl-segmentation=%v tx-udp_tnl-csum-segmentation=%v", p,
				f["tx-udp_tnl-segmentation"], f["tx-udp_tnl-csum-segmentation"]))
		}
		return nil
	})
	return strings.Join(out, "\n")
}

// applyIn applies the INT configuration cfg (JSON) through o from ns.
func applyIn(t *testing.T, ns netns.NsHandle, o *dtel.Orchestrator, cfg string) error {
	t.Helper()
	dev := &gen.Device{}
	if err := gen.Unmarshal([]byte(cfg), dev); err != nil {
		t.Fatal(err)
	}
	var err error
	inNS(t, ns, func() error {
		err = o.Apply(context.Background(), dev)
		return nil
	})
	return err
}

// TestTunnelOutputOnDemand: the soft dataplane started on a namespace's
// ports leaves links, tc and the ports' features as they were; a node
// tunnel-address gives every port its TAP (intd-tnl<ifindex>, up, its
// ingress redirected to the port) and UDP tunnel segmentation, each
// change logged; a configuration without it takes all of it away again,
// INT transit alone brings it back (hops are pushed onto tunnel
// super-packets whole), and Close takes it away. A TAP that cannot be
// made (a foreign interface has its name) refuses the configuration with
// the tunnel-address path and leaves the host and the switch as they
// were, the foreign interface included.
func TestTunnelOutputOnDemand(t *testing.T) {
	ns, h := testNS(t)
	addVeth(t, h, "pa", "xa")
	addVeth(t, h, "pb", "xb")
	inNS(t, ns, func() error {
		// Off to begin with (a veth has them on), so that turning them
		// on shows.
		for _, p := range []string{"pa", "pb"} {
			if err := ethtool.SetFeatures(p, func(n string) bool { return tunnelFeatures[n] }, false); err != nil {
				return err
			}
		}
		return nil
	})
	idle := hostTunnelState(t, ns, h, "pa", "pb")
	d, logs := startDataplane(t, ns, "pa", "pb")
	o := dtel.New(d)
	if got := hostTunnelState(t, ns, h, "pa", "pb"); got != idle {
		t.Fatalf("started, not configured: host\n%s\nwant as before\n%s", got, idle)
	}
	idx := map[string]int{}
	for _, p := range d.ports {
		idx[p.Name] = p.Index
	}
	tunnelled := idle
	for _, p := range []string{"pa", "pb"} {
		tap := fmt.Sprintf("intd-tnl%d", idx[p])
		tunnelled += "\n" + tap + "(tuntap,up=true) qdisc clsact filter u32 redirect to " + p
	}
	tunnelled = strings.ReplaceAll(tunnelled, "tx-udp_tnl-segmentation=false tx-udp_tnl-csum-segmentation=false",
		"tx-udp_tnl-segmentation=true tx-udp_tnl-csum-segmentation=true")
	sortLinks := func(s string) string {
		lines := strings.Split(s, "\n")
		slices.SortStableFunc(lines, func(a, b string) int {
			fa, fb := strings.Contains(a, " tx-udp"), strings.Contains(b, " tx-udp")
			if fa != fb {
				if fa {
					return 1
				}
				return -1
			}
			if fa {
				return 0
			}
			return strings.Compare(a, b)
		})
		return strings.Join(lines, "\n")
	}
	tunnelled = sortLinks(tunnelled)

	const (
		endpoint = `{"intd-int:int": {"node": {"config": {"enabled": true, "node-id": 1, "int-endpoint": true, "tunnel-address": "192.0.2.1"}}}}`
		noTunnel = `{"intd-int:int": {"node": {"config": {"enabled": true, "node-id": 1, "int-endpoint": true}}}}`
		transit  = `{"intd-int:int": {"node": {"config": {"enabled": true, "node-id": 1, "int-transit": true}}}}`
		none     = `{}`
	)
	tunnelEnd := netip.MustParseAddr("192.0.2.1")
	for i, step := range []struct {
		name, cfg string
		want      string
		end       bool
	}{
		{"tunnel-address", endpoint, tunnelled, true},
		{"no tunnel-address", noTunnel, idle, false},
		{"INT transit", transit, tunnelled, false},
		{"no INT", none, idle, false},
		{"tunnel-address again", endpoint, tunnelled, true},
	} {
		if err := applyIn(t, ns, o, step.cfg); errors.Is(err, soft.ErrNoSessionTunnels) {
			t.Skip(err)
		} else if err != nil {
			t.Fatalf("%d %s: %v", i, step.name, err)
		}
		if got := hostTunnelState(t, ns, h, "pa", "pb"); got != step.want {
			t.Fatalf("%d %s: host\n%s\nwant\n%s", i, step.name, got, step.want)
		}
		if d.IsTunnelEnd(0, tunnelEnd) != step.end {
			t.Errorf("%d %s: tunnel end %v, want %v", i, step.name, !step.end, step.end)
		}
	}
	for _, p := range []string{"pa", "pb"} {
		tap := fmt.Sprintf("TAP intd-tnl%d", idx[p])
		if n := strings.Count(logs.String(), "interface="+p+" setting=\"session tunnel output\" added=\""+tap); n != 3 {
			t.Errorf("%s: %d changes logged, want 3:\n%s", p, n, logs)
		}
		if n := strings.Count(logs.String(), "interface="+p+" setting=\"session tunnel output\" removed=\""+tap); n != 2 {
			t.Errorf("%s: %d restorations logged, want 2:\n%s", p, n, logs)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := hostTunnelState(t, ns, h, "pa", "pb"); got != idle {
		t.Fatalf("closed: host\n%s\nwant as before\n%s", got, idle)
	}

	// A foreign interface named as pb's TAP would be: refused, pa's TAP
	// made first is taken away again.
	d, _ = startDataplane(t, ns, "pa", "pb")
	o = dtel.New(d)
	foreign := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("intd-tnl%d", idx["pb"])}, PeerName: "xf"}
	if err := h.LinkAdd(foreign); err != nil {
		t.Fatal(err)
	}
	before := hostTunnelState(t, ns, h, "pa", "pb")
	err := applyIn(t, ns, o, endpoint)
	var inv *dtel.InvalidError
	if !errors.As(err, &inv) || inv.Path != "/int/node/config/tunnel-address" || !strings.Contains(err.Error(), foreign.Name+" exists already") {
		t.Fatalf("Apply with %s taken: %v, want a refusal at /int/node/config/tunnel-address naming it", foreign.Name, err)
	}
	t.Logf("refused: %v", err)
	if got := hostTunnelState(t, ns, h, "pa", "pb"); got != before {
		t.Fatalf("refused: host\n%s\nwant as before\n%s", got, before)
	}
	if d.IsTunnelEnd(0, tunnelEnd) {
		t.Error("refused, yet the tunnel-address is applied")
	}
	// Once the name is free, the same configuration is taken.
	if err := h.LinkDel(foreign); err != nil {
		t.Fatal(err)
	}
	if err := applyIn(t, ns, o, endpoint); err != nil {
		t.Fatal(err)
	}
	if got := hostTunnelState(t, ns, h, "pa", "pb"); got != tunnelled {
		t.Fatalf("after the refusal, name free: host\n%s\nwant\n%s", got, tunnelled)
	}
}

// TestTransmitTunnelCut: a session tunnel super-packet handed to a port
// without tunnel output (taken away while it was queued) leaves cut into
// segments, each with the outer headers and INT, none lost.
func TestTransmitTunnelCut(t *testing.T) {
	h1, _, s1, _ := twoLinks(t, PortConfig{})
	const mss, segs = 1000, 9
	f, p, _ := tunnelSuperPacket(t, segs*mss, mss)
	if s1.CanTunnel() {
		t.Fatal("a port opened alone has tunnel output")
	}
	s1.TransmitTunnel(f, p.L4, p.Next, mss)
	s1.Flush()
	got := readAll(t, h1, segs, 2*time.Second)
	pr := wire.Parser{VXLANGPEPort: spec.PortVXLANGPE}
	n := 0
	for _, g := range got {
		var q wire.Packet
		if pr.Parse(g, &q) != nil || q.INT < 0 || !bytes.Equal(g[14+20+8:q.Next], f[14+20+8:p.Next]) {
			continue
		}
		n++
	}
	if st := s1.Stats(); n != segs || st.TxErrors != 0 || st.TxTunnel != 0 {
		t.Fatalf("%d segments in the tunnel at the peer (of %d frames), %d errors, %d sent whole; want %d segments",
			n, len(got), st.TxErrors, st.TxTunnel, segs)
	}
}

// TestSessionTunnelOutputToggled: while a TCP echo runs through the
// session tunnel lab (s1 the tunnel's source, s3 its end), s2's INT
// transit is turned off and on over and over, its TAPs removed and made
// each time while super-packets of the tunnel pass: the echo comes back
// byte for byte, s2 refuses and drops nothing, and sends super-packets
// whole through its TAPs while it has them.
func TestSessionTunnelOutputToggled(t *testing.T) {
	l := newTunnelLab(t)
	l.start(t)
	// Reports go to a free port nobody reads (the collector is not
	// under test here).
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	col := conn.LocalAddr().(*net.UDPAddr).Port
	for i, c := range []string{
		tunnelNodeConfig(1, "10.0.12.1", "fd00:12::1", "s1-h1", "10.0.23.2", "fd00:23::2", col),
		"",
		tunnelNodeConfig(3, "10.0.23.2", "fd00:23::2", "s3-h2", "", "", col),
	} {
		if c == "" {
			continue
		}
		if err := l.apply(t, i, c); errors.Is(err, soft.ErrNoSessionTunnels) {
			t.Skip(err)
		} else if err != nil {
			t.Fatalf("s%d: %v", i+1, err)
		}
	}
	o := dtel.New(l.d[1])
	on := tunnelNodeConfig(2, "", "", "", "", "", col)
	off := strings.Replace(on, `"int-transit": true`, `"int-transit": false`, 1)
	if err := applyIn(t, l.s2, o, on); err != nil {
		t.Fatal(err)
	}

	data := payloadBytes(32 << 20)
	before := l.d[1].Node().Stats()
	back := l.echo(t, "tcp4", "10.0.2.2:7000", data)
	toggles, whileOn := 0, uint64(0)
	var got []byte
	for got == nil {
		select {
		case got = <-back:
			continue
		default:
		}
		cfg, want := off, false
		if toggles%2 == 1 {
			cfg, want = on, true
		}
		if err := applyIn(t, l.s2, o, cfg); err != nil {
			t.Fatalf("toggle %d: %v", toggles, err)
		}
		if l.d[1].ports[1].CanTunnel() != want {
			t.Fatalf("toggle %d: tunnel output %v, want %v", toggles, !want, want)
		}
		toggles++
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echo: %d bytes back, want the %d sent, byte for byte", len(got), len(data))
	}
	st := l.d[1].Node().Stats()
	whileOn = st[1].TxTunnel - before[1].TxTunnel
	txErr, gsoErr := st[1].TxErrors-before[1].TxErrors, st[0].RxGSOErrors-before[0].RxGSOErrors
	t.Logf("s2: %d toggles; to s3 %d super-packets whole through the TAP, %d segments cut from s1's; %d errors, %d super-packets dropped",
		toggles, whileOn, st[0].RxSegments-before[0].RxSegments, txErr, gsoErr)
	if toggles < 4 || txErr != 0 || gsoErr != 0 {
		t.Errorf("s2: %d toggles, %d frames refused, %d super-packets dropped; want at least 4 toggles and no loss", toggles, txErr, gsoErr)
	}
	if whileOn == 0 {
		t.Error("s2 sent no super-packet whole through its TAPs")
	}
}

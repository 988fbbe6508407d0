// Command intcollector receives INT telemetry reports and keeps per-flow
// state, exposed over gNMI, Prometheus /metrics and JSON lines.
//
//	intcollector [flags]              run the collector
//	intcollector decode FILE.pcap     decode a capture into JSON lines
//	intcollector version              print the version, commit, build date and Go version
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/intd-project/intd/cmd/internal/buildinfo"
	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 {
		switch args[0] {
		case "decode":
			os.Exit(decodeMain(args[1:]))
		case "version", "-version", "--version":
			os.Exit(versionMain(args[1:], os.Stdout, os.Stderr))
		case "help", "-h", "-help", "--help":
			usage(os.Stderr)
			// The collector's flags, printed by its flag set; exits 0.
			os.Exit(serveMain([]string{"-h"}))
		}
	}
	os.Exit(serveMain(args))
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  intcollector [flags]                   receive telemetry reports (flags below)
  intcollector decode [flags] FILE.pcap  decode a capture into JSON lines (intcollector decode -h)
  intcollector version                   print the version, commit, build date and Go version

`)
}

func versionMain(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "intcollector version: unexpected arguments %q\n", args)
		return 2
	}
	if err := buildinfo.Read().Write(stdout, "intcollector"); err != nil {
		return 1
	}
	return 0
}

func decodeMain(args []string) int {
	fs := flag.NewFlagSet("decode", flag.ExitOnError)
	port := fs.Uint("report-port", 32766, "UDP destination port of telemetry reports")
	var m marking
	m.flags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: intcollector decode [flags] FILE.pcap")
		fs.PrintDefaults()
	}
	fs.Parse(args)
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	d := collector.NewFrameDecoder(uint16(*port))
	if err := m.apply(&d.Parser); err != nil {
		fmt.Fprintln(os.Stderr, "intcollector:", err)
		return 2
	}
	if err := d.DecodePcap(f, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "intcollector:", err)
		return 1
	}
	return 0
}

// marking is how INT v2.1 is marked in the decoded packets (all off by
// default: INT over TCP/UDP is then found by its shim alone).
type marking struct {
	udpPort, dscp, dscpMask, greProto uint
	probe                             string
}

func (m *marking) flags(fs *flag.FlagSet) {
	fs.UintVar(&m.udpPort, "int-udp-port", 0, "UDP port marking INT v2.1 in embedded packets (0: detect)")
	fs.UintVar(&m.dscp, "int-dscp", 0, "DSCP value marking INT v2.1 over TCP/UDP")
	fs.UintVar(&m.dscpMask, "int-dscp-mask", 0, "DSCP mask for -int-dscp (0: detect by the shim)")
	fs.StringVar(&m.probe, "int-probe-marker", "", "64-bit probe marker announcing INT v2.1 after TCP/UDP, e.g. 0xaaaaaaaabbbbbbbb")
	fs.UintVar(&m.greProto, "int-gre-proto", 0, "GRE protocol type announcing INT v2.1 (0: none)")
}

func (m *marking) apply(p *wire.Parser) error {
	if m.udpPort > 0xffff || m.dscp > 0x3f || m.dscpMask > 0x3f || m.greProto > 0xffff {
		return fmt.Errorf("-int-udp-port, -int-gre-proto (0-65535), -int-dscp and -int-dscp-mask (0-63) out of range")
	}
	p.UDPPort, p.DSCP, p.DSCPMask, p.GREProto = uint16(m.udpPort), uint8(m.dscp), uint8(m.dscpMask), uint16(m.greProto)
	if m.probe != "" {
		v, err := strconv.ParseUint(m.probe, 0, 64)
		if err != nil || v == 0 {
			return fmt.Errorf("-int-probe-marker %q: not a non-zero 64-bit number", m.probe)
		}
		p.ProbeMarker = v
	}
	return nil
}

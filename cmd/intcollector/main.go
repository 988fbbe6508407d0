// Command intcollector receives INT telemetry reports and keeps per-flow
// state, exposed over gNMI, Prometheus /metrics and JSON lines.
//
//	intcollector [flags]              run the collector
//	intcollector decode FILE.pcap     decode a capture into JSON lines
//	intcollector query -node N        flows through a node above a latency, from NATS JetStream
//	intcollector version              print the version, commit, build date and Go version
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"

	"github.com/intd-project/intd/cmd/internal/buildinfo"
	"github.com/intd-project/intd/dataplane/collector"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 {
		switch args[0] {
		case "decode":
			os.Exit(decodeMain(args[1:], os.Stdout, os.Stderr))
		case "query":
			os.Exit(queryMain(args[1:], os.Stdout, os.Stderr))
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
  intcollector query -node N [flags]     flows through node N above a latency, from JetStream (intcollector query -h)
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

func decodeMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("decode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Uint("report-port", 32766, "UDP destination port of telemetry reports")
	var m marking
	m.flags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: intcollector decode [flags] FILE.pcap")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "intcollector:", err)
		return 1
	}
	defer f.Close()
	d := collector.NewFrameDecoder(uint16(*port))
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if _, err := m.discoverMarking(context.Background(), fs, log); err != nil {
		fmt.Fprintln(stderr, "intcollector:", err)
		return 2
	}
	if err := m.apply(&d.Parser); err != nil {
		fmt.Fprintln(stderr, "intcollector:", err)
		return 2
	}
	w := bufio.NewWriter(stdout)
	err = d.DecodePcap(f, w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(stderr, "intcollector:", err)
		return 1
	}
	return 0
}

// marking is how INT v2.1 is marked in the decoded packets, with the
// defaults of intd's marking configuration (INT over TCP/UDP without the
// marking is still found by a consistent shim).
type marking struct {
	udpPort, dscp, dscpMask, greProto, gpeNext, geneveClass uint
	probe                                                   string
	discover                                                discovery
}

func (m *marking) flags(fs *flag.FlagSet) {
	fs.UintVar(&m.udpPort, "int-udp-port", 0, "UDP destination port marking INT v2.1 (marking udp-port; 0: none)")
	fs.UintVar(&m.dscp, "int-dscp", collector.DefaultDSCP, "DSCP value marking INT v2.1 over TCP/UDP (marking dscp-value)")
	fs.UintVar(&m.dscpMask, "int-dscp-mask", collector.DefaultDSCPMask, "DSCP bits of the INT marking (marking dscp-mask; 0: no DSCP marking)")
	fs.StringVar(&m.probe, "int-probe-marker", "", "64-bit probe marker announcing INT v2.1 after TCP/UDP, e.g. 0xaaaaaaaabbbbbbbb (marking probe-marker)")
	fs.UintVar(&m.greProto, "int-gre-proto", 0, "GRE protocol type announcing INT v2.1 (marking gre-protocol-type; 0: none)")
	fs.UintVar(&m.gpeNext, "int-gpe-next-protocol", spec.VXLANGPENextProtoINT, "VXLAN-GPE next protocol announcing INT (marking vxlan-gpe-next-protocol)")
	fs.UintVar(&m.geneveClass, "int-geneve-option-class", spec.GeneveClassINT, "Geneve option class of INT (marking geneve-option-class)")
	m.discover.flags(fs)
}

func (m *marking) apply(p *wire.Parser) error {
	if m.udpPort > 0xffff || m.greProto > 0xffff || m.geneveClass > 0xffff {
		return fmt.Errorf("-int-udp-port, -int-gre-proto and -int-geneve-option-class: the range is 0 to 65535")
	}
	if m.dscp > 0x3f || m.dscpMask > 0x3f {
		return fmt.Errorf("-int-dscp and -int-dscp-mask: the range is 0 to 63")
	}
	if m.gpeNext == 0 || m.gpeNext > 0xff || m.geneveClass == 0 {
		return fmt.Errorf("-int-gpe-next-protocol (1-255) and -int-geneve-option-class (1-65535) out of range")
	}
	p.UDPPort, p.DSCP, p.DSCPMask, p.GREProto = uint16(m.udpPort), uint8(m.dscp), uint8(m.dscpMask), uint16(m.greProto)
	p.GPENextProto, p.GeneveClass = uint8(m.gpeNext), uint16(m.geneveClass)
	p.ProbeMarker = 0
	if m.probe != "" {
		v, err := strconv.ParseUint(m.probe, 0, 64)
		if err != nil || v == 0 {
			return fmt.Errorf("-int-probe-marker %q: not a non-zero 64-bit number", m.probe)
		}
		p.ProbeMarker = v
	}
	return nil
}

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

	"github.com/intd-project/intd/cmd/internal/buildinfo"
	"github.com/intd-project/intd/dataplane/collector"
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
	if err := d.DecodePcap(f, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "intcollector:", err)
		return 1
	}
	return 0
}

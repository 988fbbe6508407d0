// Command intcollector receives INT telemetry reports and keeps per-flow
// state, exposed over gNMI, Prometheus /metrics and JSON lines.
//
//	intcollector [flags]              run the collector
//	intcollector decode FILE.pcap     decode a capture into JSON lines
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/intd-project/intd/dataplane/collector"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "decode" {
		os.Exit(decodeMain(os.Args[2:]))
	}
	os.Exit(serveMain(os.Args[1:]))
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

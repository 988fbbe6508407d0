package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/intd-project/intd/dataplane/collector/stream"
)

// queryMain answers "flows through node N with latency above X in the
// last D" from the summaries the collectors published to JetStream, one
// JSON line per flow, highest latency first.
func queryMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	urls := fs.String("nats", "nats://127.0.0.1:4222", "NATS server URLs (comma-separated)")
	q := stream.Query{}
	fs.StringVar(&q.Stream, "nats-stream", stream.DefaultStream, "JetStream stream the collectors publish to")
	fs.StringVar(&q.Prefix, "nats-subject-prefix", stream.DefaultPrefix, "subject prefix the collectors publish with")
	node := fs.Uint("node", 0, "node ID the flows went through (required)")
	above := fs.Duration("latency-above", 0, "select flows whose latency went above this, e.g. 500us")
	fs.BoolVar(&q.HopLatency, "hop-latency", false, "compare the node's hop latency instead of the end-to-end latency")
	fs.DurationVar(&q.Since, "since", 10*time.Minute, "how far back to look")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: intcollector query -node N [-latency-above X] [-since 10m] [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "node" })
	if fs.NArg() != 0 || !set || *node > 0xffffffff || *above < 0 || q.Since <= 0 {
		fs.Usage()
		return 2
	}
	q.Node, q.Above = uint32(*node), uint64(*above)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	nc, js, err := stream.Connect(*urls, "intcollector query", slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		fmt.Fprintln(stderr, "intcollector query:", err)
		return 1
	}
	defer nc.Close()
	res, err := q.Run(ctx, js)
	if err != nil {
		fmt.Fprintln(stderr, "intcollector query:", err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	for _, r := range res {
		if err := enc.Encode(r); err != nil {
			return 1
		}
	}
	return 0
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/openconfig/ygot/ygot"

	"github.com/intd-project/intd/dtel"
	"github.com/intd-project/intd/gen"
	"github.com/intd-project/intd/sai/saitest"
	"github.com/intd-project/intd/server"
	"github.com/intd-project/intd/server/sonic"
)

// sonicSource is the CONFIG_DB source of `intd run --sonic-config-db` or
// --sonic-db-config, nil without either.
func sonicSource(o *runOptions, log *slog.Logger) (*sonic.Source, error) {
	if o.SonicConfigDB == "" && o.SonicDBConfig == "" {
		return nil, nil
	}
	if o.StartupConfig != "" {
		return nil, errors.New("--startup-config conflicts with --sonic-config-db and --sonic-db-config: CONFIG_DB holds the configuration")
	}
	dbs, err := sonic.Locate(o.SonicConfigDB, o.SonicDBConfig)
	if err != nil {
		return nil, err
	}
	if o.NodeID > 1<<32-1 {
		return nil, fmt.Errorf("--node-id %d out of range", o.NodeID)
	}
	return sonic.New(sonic.Options{DBs: dbs, Target: o.Target, NodeID: uint32(o.NodeID),
		StateInterval: o.StateInterval, Log: log})
}

// sonicTarget adapts the target's options to a CONFIG_DB source: it owns
// the configuration, which starts empty (or as last saved) until CONFIG_DB
// is read.
func sonicTarget(src *sonic.Source, topts *server.TargetOptions) {
	if src == nil {
		return
	}
	topts.Initial = &gen.Device{}
	topts.Owner = src.Owner()
}

func sonicCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := errors.New("usage: intd sonic translate [--to-sonic] [--node-id N] FILE (- for stdin)")
	fs := flag.NewFlagSet("intd sonic translate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	toSonic := fs.Bool("to-sonic", false, "translate intd YANG JSON (RFC 7951) into config_db.json tables")
	nodeID := fs.Uint("node-id", 0, "node-id used when the config has no DTEL|SWITCH_ID (left out when 0)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: intd sonic translate [--to-sonic] [--node-id N] FILE")
		fmt.Fprintln(stderr, "\nPrints the intd YANG configuration (RFC 7951 JSON) a SONiC config_db.json's DTEL tables and")
		fmt.Fprintln(stderr, "DTEL_FLOW_WATCHLIST ACL rules become, checked by intd's orchestrator as `intd run --sonic-config-db`")
		fmt.Fprintln(stderr, "would apply them; refused entries are listed on stderr and the exit status is non-zero. With --to-sonic,")
		fmt.Fprintln(stderr, "the reverse: what CONFIG_DB cannot express is listed on stderr.")
		fs.PrintDefaults()
	}
	switch {
	case len(args) > 0 && args[0] == "translate":
		args = args[1:]
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
	default:
		fs.Usage()
		return usage
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *nodeID > 1<<32-1 {
		fs.Usage()
		return usage
	}
	var data []byte
	var err error
	if fs.Arg(0) == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(fs.Arg(0))
	}
	if err != nil {
		return err
	}
	if *toSonic {
		dev, err := gen.ParseConfig(data)
		if err != nil {
			return fmt.Errorf("%s: %w", fs.Arg(0), err)
		}
		cfg, notes := sonic.ToConfigDB(dev)
		out, err := sonic.MarshalConfigDB(cfg)
		if err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintln(stderr, "not in CONFIG_DB:", n)
		}
		_, err = stdout.Write(out)
		return err
	}
	cfg, err := sonic.ParseConfigDB(data)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	dev, refused, err := translateConfigDB(ctx, cfg, uint32(*nodeID), stderr)
	if err != nil {
		return err
	}
	js, err := ygot.EmitJSON(dev, &ygot.EmitJSONConfig{Format: ygot.RFC7951, Indent: "  ",
		RFC7951Config: &ygot.RFC7951JSONConfig{AppendModuleName: true}})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, js)
	if refused > 0 {
		return fmt.Errorf("%d entries refused", refused)
	}
	return nil
}

// translateConfigDB resolves cfg against intd's orchestrator on an
// in-memory dataplane with every capability, so that what it prints is
// what `intd run` would apply (a real dataplane may refuse more).
func translateConfigDB(ctx context.Context, cfg sonic.Config, nodeID uint32, stderr io.Writer) (*gen.Device, int, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	orch := dtel.New(saitest.New(), dtel.WithLogger(quiet))
	res, err := sonic.Resolve(ctx, cfg, nil, sonic.TranslateOptions{NodeID: nodeID}, func(ctx context.Context, d *gen.Device) error {
		if err := d.ΛValidate(); err != nil {
			return err
		}
		return orch.Apply(ctx, d)
	})
	if err != nil {
		return nil, 0, err
	}
	for _, st := range res.Statuses {
		if st.Applied {
			continue
		}
		field := ""
		if st.Field != "" {
			field = " field " + st.Field
		}
		fmt.Fprintf(stderr, "refused %s%s: %s\n", st.Key, field, st.Reason)
	}
	dev := res.Device
	if nodeID == 0 && cfg.Get(sonic.Key{Table: sonic.TableDTel, Name: "SWITCH_ID"}) == nil {
		// No node-id was given either way: leave it out.
		dev.GetInt().GetNode().GetConfig().NodeId = nil
	}
	return dev, res.Refused(), nil
}

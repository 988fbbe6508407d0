package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/intd-project/intd/cmd/internal/buildinfo"
)

func versionCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("intd version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return buildinfo.Read().Write(stdout, "intd")
}

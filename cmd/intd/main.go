// Command intd is the In-band Network Telemetry node, managed over gNMI.
//
// Usage:
//
//	intd run [flags]       serve one node (see `intd run -h`); INT stays idle until configured
//	intd lab [flags]       an in-process INT fabric, each switch a gNMI target (see `intd lab -h`)
//	intd passwd USER       print a credentials-file line for USER
//	intd version           print the version, commit, build date and Go version
//	intd completion SHELL  print a bash or zsh completion script
//	intd help [SUBCOMMAND]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands are the subcommands. A function rather than a variable: the
// completion script lists them.
func commands() map[string]command {
	return map[string]command{
		"run":        {"serve one INT node over gNMI", runCmd},
		"lab":        {"run an in-process INT fabric (h1 - s1 - s2 - s3 - h2) with gNMI on 127.0.0.1:9339", labCmd},
		"sonic":      {"translate SONiC config_db.json DTel tables to intd's YANG and back", sonicCmd},
		"passwd":     {"read a password on stdin, print a credentials-file line for USER", passwdCmd},
		"version":    {"print the version, commit, build date and Go version", versionCmd},
		"completion": {"print a bash or zsh completion script (intd completion bash|zsh)", completionCmd},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	processWide = true
	err := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var logged loggedError
	switch {
	case err == nil:
	case errors.As(err, &logged):
		os.Exit(1)
	default:
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "intd:", err)
		}
		os.Exit(2)
	}
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0:
		usage(stderr)
		return errors.New("no subcommand")
	case args[0] == "help" && len(args) > 1:
		// `intd help run` is `intd run -h`.
		args = []string{args[1], "-h"}
	case args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		usage(stdout)
		return nil
	case args[0] == "-version" || args[0] == "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands()[args[0]]
	if !ok {
		usage(stderr)
		return fmt.Errorf("unknown subcommand %q", args[0])
	}
	err := c.run(ctx, args[1:], stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h asked for the usage, and got it
	}
	return err
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: intd SUBCOMMAND [flags]   (intd help SUBCOMMAND for its flags)\n\nsubcommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintf(w, "\nintd run --dataplane values:%s\n", dataplaneUsage())
}

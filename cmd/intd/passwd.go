package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/intd-project/intd/server"
)

func passwdCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("intd passwd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "read-only", "role: read-only or read-write")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: intd passwd [-role read-only|read-write] USER < password

Reads USER's password from the first line of standard input and prints the
line for USER to add to the --credentials file of intd run.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: intd passwd [-role read-only|read-write] USER < password")
	}
	if *role != "read-only" && *role != "read-write" {
		return fmt.Errorf("bad -role %q (read-only or read-write)", *role)
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return fmt.Errorf("reading the password from stdin: %w", err)
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return errors.New("empty password")
	}
	h, err := server.HashPassword(pw)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s %s\n", fs.Arg(0), *role, h)
	return nil
}

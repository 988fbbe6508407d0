// Command spech writes sai/spec's C header for the BPF program (run by go
// generate in dataplane/ebpf).
package main

import (
	"log"
	"os"

	"github.com/intd-project/intd/sai/spec"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: spech OUTPUT.h")
	}
	if err := os.WriteFile(os.Args[1], spec.CHeader(), 0o644); err != nil {
		log.Fatal(err)
	}
}

// Package buildinfo says which build of intd and intcollector is running:
// module version, commit, build date and Go version, from the build
// information the Go toolchain embeds, overridden by values stamped with
// -ldflags -X for release builds (make release) and for builds made outside
// a git checkout, where the toolchain records no commit.
package buildinfo

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Stamped by make release:
//
//	-X github.com/intd-project/intd/cmd/internal/buildinfo.version=v1.2.3
//	-X github.com/intd-project/intd/cmd/internal/buildinfo.commit=<sha>
//	-X github.com/intd-project/intd/cmd/internal/buildinfo.date=<RFC 3339>
var version, commit, date string

// Info describes one build.
type Info struct {
	Module    string // module path of the main module
	Version   string // module version: a tag, a pseudo-version or "(devel)"
	Commit    string // VCS revision, empty if unknown
	Date      string // commit time (RFC 3339), empty if unknown
	Modified  bool   // built from a work tree with uncommitted changes
	GoVersion string // toolchain that built the binary
	Platform  string // GOOS/GOARCH
}

// Read returns this binary's build information.
func Read() Info {
	i := Info{GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		i.Module, i.Version = bi.Main.Path, bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Commit = s.Value
			case "vcs.time":
				i.Date = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		i.Version = version
	}
	if commit != "" {
		i.Commit = commit
	}
	if date != "" {
		i.Date = date
	}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	return i
}

// Write prints the build information as `PROGRAM version` shows it:
// the program and version on the first line, then one item per line.
func (i Info) Write(w io.Writer, program string) error {
	c, d := i.Commit, i.Date
	if c == "" {
		c = "unknown"
	}
	if i.Modified {
		c += " (modified)"
	}
	if d == "" {
		d = "unknown"
	}
	_, err := fmt.Fprintf(w, "%s %s\ncommit: %s\ndate:   %s\ngo:     %s %s\n", program, i.Version, c, d, i.GoVersion, i.Platform)
	return err
}

package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestStampsWin(t *testing.T) {
	i := Read()
	if i.GoVersion != runtime.Version() || i.Platform != runtime.GOOS+"/"+runtime.GOARCH || i.Version == "" {
		t.Errorf("unstamped build: %+v", i)
	}
	version, commit, date = "v1.2.3", "abc123", "2026-01-02T03:04:05Z"
	defer func() { version, commit, date = "", "", "" }()
	i = Read()
	if i.Version != "v1.2.3" || i.Commit != "abc123" || i.Date != "2026-01-02T03:04:05Z" {
		t.Errorf("stamped values not used: %+v", i)
	}
	var b strings.Builder
	i.Modified = true
	if err := i.Write(&b, "intd"); err != nil {
		t.Fatal(err)
	}
	want := "intd v1.2.3\ncommit: abc123 (modified)\ndate:   2026-01-02T03:04:05Z\ngo:     " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if b.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", b.String(), want)
	}
}

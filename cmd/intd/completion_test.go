package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := dispatch(context.Background(), []string{"completion", shell}, &out, &errOut); err != nil {
		t.Fatalf("intd completion %s: %v\n%s", shell, err, errOut.String())
	}
	dir := t.TempDir()
	name := "intd.bash"
	if shell == "zsh" {
		name = "_intd" // zsh finds completion functions by file name in fpath
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func dataplaneNamesSorted() string {
	var names []string
	for n := range dataplanes {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// TestCompletionBash sources the generated script in bash and asks it
// what it completes, as bash would on TAB.
func TestCompletionBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	script := completionScript(t, "bash")
	files := t.TempDir()
	os.WriteFile(filepath.Join(files, "cert.pem"), nil, 0o644)
	os.Mkdir(filepath.Join(files, "statedir"), 0o755)
	for _, tc := range []struct {
		words []string
		want  string // the candidates, space-separated, sorted
	}{
		{[]string{"intd", "ver"}, "version"},
		{[]string{"intd", "--v"}, "--version"},
		{[]string{"intd", "help", "r"}, "run"},
		{[]string{"intd", "completion", ""}, "bash zsh"},
		{[]string{"intd", "run", "--data"}, "--dataplane"},
		{[]string{"intd", "run", "--dataplane", ""}, dataplaneNamesSorted()},
		{[]string{"intd", "run", "-log-format", ""}, "json text"},
		{[]string{"intd", "run", "--tls-cert", filepath.Join(files, "ce")}, filepath.Join(files, "cert.pem")},
		{[]string{"intd", "run", "--interfaces", "lo,l"}, "lo,lo"},
		{[]string{"intd", "run", "--addr", ""}, ""},
		{[]string{"intd", "lab", "--topo"}, "--topology"},
		{[]string{"intd", "lab", "--save-dir", filepath.Join(files, "sta")}, filepath.Join(files, "statedir")},
		{[]string{"intd", "passwd", "--role", "read-w"}, "read-write"},
	} {
		// compopt works only while bash is completing; it tunes the
		// display, not the candidates.
		prog := `compopt() { :; }; source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _intd; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command("bash", append([]string{"-c", prog, "bash", script}, tc.words...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.words, err, out)
		}
		got := strings.Fields(string(out))
		sort.Strings(got)
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q completes to %q, want %q", tc.words, got, tc.want)
		}
	}
}

// zshDriver runs an interactive zsh in a pseudo-terminal (zsh/zpty),
// types each line followed by TAB, and records the line as completion
// left it.
const zshDriver = `zmodload zsh/zpty
dir=$1 out=$2; shift 2
: > $out
zpty z zsh -f -i
zpty -w z "PS1=; RPROMPT=; fpath=($dir \$fpath); autoload -Uz compinit; compinit -u -D; dump() { print -r -- \"<\$BUFFER>\" >> $out; BUFFER=; }; zle -N dump; bindkey '^X' dump; print -r -- READY >> $out"
wait_lines() { local i; for i in {1..200}; do (( $(wc -l < $out) >= $1 )) && return 0; sleep 0.05; done; return 1 }
wait_lines 1 || { print "zsh did not start"; exit 1 }
n=1
for line in "$@"; do
	zpty -w -n z "$line"$'\t'$'\C-x'
	(( n++ ))
	wait_lines $n || { print "no answer for: $line"; exit 1 }
done
zpty -d z
`

// TestCompletionZsh drives zsh's completion system with the generated
// function, TAB by TAB.
func TestCompletionZsh(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("zsh not installed (Debian package zsh)")
	}
	script := completionScript(t, "zsh")
	files := t.TempDir()
	os.WriteFile(filepath.Join(files, "cert.pem"), nil, 0o644)
	cases := []struct{ typed, want string }{
		{"intd ru", "intd run "},
		{"intd run --datap", "intd run --dataplane="},
		{"intd run --log-format=j", "intd run --log-format=json "},
		{"intd run --tls-cert=" + filepath.Join(files, "ce"), "intd run --tls-cert=" + filepath.Join(files, "cert.pem") + " "},
		{"intd run --interfaces=l", "intd run --interfaces=lo,"},
		{"intd passwd --ro", "intd passwd --role="},
		{"intd passwd --role=read-w", "intd passwd --role=read-write "},
		{"intd lab --summ", "intd lab --summary-every="},
		{"intd help ver", "intd help version "},
		{"intd completion z", "intd completion zsh "},
	}
	if len(dataplanes) == 1 {
		for n := range dataplanes {
			cases = append(cases, struct{ typed, want string }{"intd run --dataplane=", "intd run --dataplane=" + n + " "})
		}
	}
	var typed []string
	for _, c := range cases {
		typed = append(typed, c.typed)
	}
	out := filepath.Join(t.TempDir(), "out")
	driver := exec.Command("zsh", append([]string{"-f", "-c", zshDriver, "zsh", filepath.Dir(script), out}, typed...)...)
	if b, err := driver.CombinedOutput(); err != nil {
		t.Fatalf("zsh: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(cases)+1 {
		t.Fatalf("zsh answered %d lines for %d:\n%s", len(lines)-1, len(cases), b)
	}
	for i, c := range cases {
		if got := strings.TrimSuffix(strings.TrimPrefix(lines[i+1], "<"), ">"); got != c.want {
			t.Errorf("%q completes to %q, want %q", c.typed, got, c.want)
		}
	}
}

// TestHelp: -h of every subcommand prints its usage and is not an
// error (intd exits 0), and the usages say what they take.
func TestHelp(t *testing.T) {
	for name := range commands() {
		var out, errOut bytes.Buffer
		if err := dispatch(context.Background(), []string{name, "-h"}, &out, &errOut); err != nil {
			t.Errorf("intd %s -h: %v", name, err)
		}
		if errOut.Len() == 0 {
			t.Errorf("intd %s -h printed nothing", name)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"passwd", "-h"}, "USER"},
		{[]string{"run", "-h"}, "-dataplane"},
		{[]string{"help", "run"}, "-interfaces"},
		{[]string{"completion", "-h"}, "bash|zsh"},
	} {
		var out bytes.Buffer
		if err := dispatch(context.Background(), tc.args, &out, &out); err != nil {
			t.Errorf("intd %v: %v", tc.args, err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("intd %v does not mention %q:\n%s", tc.args, tc.want, out.String())
		}
	}
	var out bytes.Buffer
	if err := dispatch(context.Background(), []string{"--help"}, &out, &out); err != nil || !strings.Contains(out.String(), "completion") || !strings.Contains(out.String(), "version") {
		t.Errorf("intd --help: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := dispatch(context.Background(), []string{"--version"}, &out, &out); err != nil || !strings.HasPrefix(out.String(), "intd ") || !strings.Contains(out.String(), "\ngo:     go") {
		t.Errorf("intd --version: %v\n%s", err, out.String())
	}
	if err := dispatch(context.Background(), []string{"completion", "fish"}, &out, &out); err == nil {
		t.Error("intd completion fish accepted")
	}
}

// Every enumerated value table names a real flag.
func TestCompletionTableFlags(t *testing.T) {
	subs, err := completionTable()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range subs {
		for _, f := range s.flags {
			seen[f.name] = true
		}
	}
	for name := range flagValues {
		if !seen[name] {
			t.Errorf("flagValues[%q]: no subcommand has that flag", name)
		}
	}
	for _, want := range []string{"dataplane", "interfaces", "addr", "topology", "role"} {
		if !seen[want] {
			t.Errorf("the completion table lacks --%s", want)
		}
	}
}

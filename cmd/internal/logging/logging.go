// Package logging sets up the structured logging of intd's commands:
// one slog logger, in the format the user asked for, writes every line
// the process prints.
package logging

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"google.golang.org/grpc/grpclog"
)

// New builds the slog logger --log-level and --log-format ask for.
func New(level, format string, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("bad --log-level: %w", err)
	}
	ho := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("bad --log-format %q (text or json)", format)
}

// RouteProcess makes log the only writer of the process's standard error:
// it becomes slog's default (and so the log package's), gRPC logs through
// it, and whatever else writes to os.Stderr (glog, used by the gNMI
// cache) is read back line by line and logged. The returned function
// undoes it, once every captured line is logged.
func RouteProcess(log *slog.Logger) (restore func()) {
	slog.SetDefault(log)
	grpclog.SetLoggerV2(grpcLogger{log.With("component", "grpc")})
	// glog writes to files in /tmp unless told to use standard error.
	if f := flag.CommandLine.Lookup("logtostderr"); f != nil {
		_ = f.Value.Set("true")
	}
	r, w, err := os.Pipe()
	if err != nil {
		log.Warn("cannot capture standard error; lines written there by libraries are not structured", "err", err)
		return func() {}
	}
	orig := os.Stderr
	os.Stderr = w
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			logLine(log, sc.Text())
		}
	}()
	return func() {
		os.Stderr = orig
		w.Close()
		<-done
		r.Close()
	}
}

// logLine logs a line a library wrote to standard error; glog's
// "Lmmdd hh:mm:ss.uuuuuu pid file:line] msg" keeps its level.
func logLine(log *slog.Logger, line string) {
	lvl, msg := slog.LevelWarn, line
	if len(line) > 5 && strings.ContainsRune("IWEF", rune(line[0])) && isDigits(line[1:5]) {
		if i := strings.Index(line, "] "); i > 0 {
			msg = line[i+2:]
			switch line[0] {
			case 'I':
				lvl = slog.LevelDebug
			case 'W':
				lvl = slog.LevelWarn
			default:
				lvl = slog.LevelError
			}
		}
	}
	log.Log(context.Background(), lvl, msg, "component", "stderr")
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// grpcLogger is gRPC's logger on slog. gRPC's informational chatter
// (connections, transports) is debug-level for intd.
type grpcLogger struct{ l *slog.Logger }

func (g grpcLogger) log(lvl slog.Level, msg string) {
	g.l.Log(context.Background(), lvl, strings.TrimRight(msg, "\n"))
}

func (g grpcLogger) Info(args ...any)   { g.log(slog.LevelDebug, fmt.Sprint(args...)) }
func (g grpcLogger) Infoln(args ...any) { g.log(slog.LevelDebug, fmt.Sprintln(args...)) }
func (g grpcLogger) Infof(format string, args ...any) {
	g.log(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Warning(args ...any)   { g.log(slog.LevelWarn, fmt.Sprint(args...)) }
func (g grpcLogger) Warningln(args ...any) { g.log(slog.LevelWarn, fmt.Sprintln(args...)) }
func (g grpcLogger) Warningf(format string, args ...any) {
	g.log(slog.LevelWarn, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Error(args ...any)   { g.log(slog.LevelError, fmt.Sprint(args...)) }
func (g grpcLogger) Errorln(args ...any) { g.log(slog.LevelError, fmt.Sprintln(args...)) }
func (g grpcLogger) Errorf(format string, args ...any) {
	g.log(slog.LevelError, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Fatal(args ...any)                 { g.Error(args...); os.Exit(1) }
func (g grpcLogger) Fatalln(args ...any)               { g.Errorln(args...); os.Exit(1) }
func (g grpcLogger) Fatalf(format string, args ...any) { g.Errorf(format, args...); os.Exit(1) }
func (g grpcLogger) V(l int) bool {
	return l <= 0 && g.l.Enabled(context.Background(), slog.LevelDebug)
}

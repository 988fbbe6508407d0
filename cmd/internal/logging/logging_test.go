package logging

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/grpclog"

	"github.com/intd-project/intd/internal/logtest"
)

// TestRouteProcess checks that what libraries print (the log package,
// gRPC's logger, glog-style lines and anything else on os.Stderr) comes
// out as JSON records of the one logger, levels kept.
func TestRouteProcess(t *testing.T) {
	var out logtest.Buffer
	l, err := New("debug", "json", &out)
	if err != nil {
		t.Fatal(err)
	}
	restore := RouteProcess(l)
	log.Print("from the log package")
	grpclog.Errorf("grpc says %d", 42)
	grpclog.Info("grpc chatter")
	fmt.Fprintln(os.Stderr, "E1124 04:53:15.370346    1673 cache.go:229] glog error line")
	fmt.Fprintln(os.Stderr, "I1124 04:53:15.370346    1673 cache.go:229] glog info line")
	fmt.Fprintln(os.Stderr, "plain text on stderr")
	restore()
	want := map[string]string{
		"from the log package": "INFO",
		"grpc says 42":         "ERROR",
		"grpc chatter":         "DEBUG",
		"glog error line":      "ERROR",
		"glog info line":       "DEBUG",
		"plain text on stderr": "WARN",
	}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Errorf("not JSON: %q", sc.Text())
			continue
		}
		msg := fmt.Sprint(r["msg"])
		if lvl, ok := want[msg]; ok {
			if r["level"] != lvl {
				t.Errorf("%q at %v, want %s", msg, r["level"], lvl)
			}
			delete(want, msg)
		}
	}
	for msg := range want {
		t.Errorf("%q not logged:\n%s", msg, out.String())
	}
}

func TestNewRefusals(t *testing.T) {
	if _, err := New("loud", "text", os.Stderr); err == nil {
		t.Error("bad level accepted")
	}
	if _, err := New("info", "xml", os.Stderr); err == nil || !strings.Contains(err.Error(), "text or json") {
		t.Errorf("bad format: %v", err)
	}
}

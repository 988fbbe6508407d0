package server

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errors speak YANG: data paths with keys, leaf names and values. Values
// and paths are checked before ygot sees them (values.go, schema.go,
// leafref.go), so its messages are rare; yangText is the net for those
// that still reach a client, rewriting what is Go in them: the generated
// root's schema path (/device/...), Go type names, "(T ptr)" and whole
// regular expressions.

var goisms = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`/device(/|\b)`), "/"},
	{regexp.MustCompile(`failed to update struct (field )?\S+ in \*?gen\.\S+ with value .*?; `), ""},
	{regexp.MustCompile(`failed to update struct \*?gen\.\S+ with value .*?; `), ""},
	{regexp.MustCompile(`\s*\((\*?[a-z0-9]+ )?ptr\)`), ""},
	{regexp.MustCompile(`\(\*?[a-z0-9]+\)`), ""},
	{regexp.MustCompile(`regular expression pattern "(\\.|[^"\\])*"`), "the pattern of its type"},
	{regexp.MustCompile(`\*?gen\.(E_)?([A-Za-z0-9]+_)*([A-Za-z0-9]+)`), "$3"},
	{regexp.MustCompile(`field name (\S+) value`), "value"},
	{regexp.MustCompile(` in path elem:\{.*?\}( elem:\{.*?\})*`), ""},
}

// yangText rewrites the Go in an error message.
func yangText(msg string) string {
	for _, g := range goisms {
		msg = g.re.ReplaceAllString(msg, g.with)
	}
	return strings.Join(strings.Fields(msg), " ")
}

// grpcError maps an error to a status with a YANG-speaking message,
// keeping any code it already has.
func grpcError(def codes.Code, err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		st := se.GRPCStatus()
		return status.Errorf(st.Code(), "%s: %s", msg, yangText(st.Message()))
	}
	return status.Errorf(def, "%s: %s", msg, yangText(err.Error()))
}

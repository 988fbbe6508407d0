package sonic

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// refusal is why an entry cannot be taken: the field at fault ("" for the
// entry as a whole) and the reason, in CONFIG_DB's terms; yangPath is the
// intd path an apply error named.
type refusal struct {
	Field, Reason string
	yangPath      string
}

func refuse(field, format string, args ...any) *refusal {
	return &refusal{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// parseUint reads a number as SONiC's orchagent does (C strtoul with base
// 0: decimal, 0x hexadecimal, leading-0 octal) within lo..hi.
func parseUint(field, s string, lo, hi uint64) (uint64, *refusal) {
	t := strings.TrimSpace(s)
	if t == "" || strings.ContainsRune(t, '_') {
		return 0, refuse(field, "%q is not a number", s)
	}
	v, err := strconv.ParseUint(t, 0, 64)
	if err != nil {
		return 0, refuse(field, "%q is not a number", s)
	}
	if v < lo || v > hi {
		return 0, refuse(field, "%d is out of range %d..%d", v, lo, hi)
	}
	return v, nil
}

// parseBool reads TRUE or FALSE (in any case).
func parseBool(field, s string) (bool, *refusal) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "TRUE":
		return true, nil
	case "FALSE":
		return false, nil
	}
	return false, refuse(field, "%q is not TRUE or FALSE", s)
}

// parsePrefix reads an address or prefix of the given family (4 or 6);
// host bits are cleared, as an ACL's mask does.
func parsePrefix(field, s string, family int) (netip.Prefix, *refusal) {
	t := strings.TrimSpace(s)
	var p netip.Prefix
	if strings.Contains(t, "/") {
		var err error
		if p, err = netip.ParsePrefix(t); err != nil {
			return p, refuse(field, "%q is not an IP prefix", s)
		}
	} else {
		a, err := netip.ParseAddr(t)
		if err != nil {
			return p, refuse(field, "%q is not an IP address or prefix", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Zone() != "" {
		return p, refuse(field, "%q has a zone", s)
	}
	switch {
	case family == 4 && !p.Addr().Is4():
		return p, refuse(field, "%q is not an IPv4 prefix", s)
	case family == 6 && (!p.Addr().Is6() || p.Addr().Is4In6()):
		return p, refuse(field, "%q is not an IPv6 prefix", s)
	}
	return p.Masked(), nil
}

// parseRange reads "LO-HI".
func parseRange(field, s string) ([2]uint16, *refusal) {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return [2]uint16{}, refuse(field, "%q is not a range LOW-HIGH", s)
	}
	a, r := parseUint(field, lo, 0, 65535)
	if r != nil {
		return [2]uint16{}, r
	}
	b, r := parseUint(field, hi, 0, 65535)
	if r != nil {
		return [2]uint16{}, r
	}
	if a > b {
		return [2]uint16{}, refuse(field, "range %d-%d: low is above high", a, b)
	}
	return [2]uint16{uint16(a), uint16(b)}, nil
}

// parseMasked reads "VALUE" or "VALUE/MASK" of at most max; a missing
// mask is max (every bit compared).
func parseMasked(field, s string, max uint64) (v, m uint8, r *refusal) {
	val, mask, has := strings.Cut(strings.TrimSpace(s), "/")
	x, r := parseUint(field, val, 0, max)
	if r != nil {
		return 0, 0, r
	}
	y := max
	if has {
		if y, r = parseUint(field, mask, 0, max); r != nil {
			return 0, 0, r
		}
	}
	if x&^y != 0 {
		return 0, 0, refuse(field, "value %#x has bits outside mask %#x", x, y)
	}
	return uint8(x), uint8(y), nil
}

// validPortName checks a port name the way interface names are checked
// below (Linux netdev rules): SONiC port names are netdev names.
func validPortName(field, s string) *refusal {
	switch {
	case s == "":
		return refuse(field, "empty port name")
	case len(s) > 15:
		return refuse(field, "port name %q is longer than 15 bytes", s)
	case s == "." || s == ".." || strings.ContainsAny(s, "/: \t\n\x00,"):
		return refuse(field, "%q is not a valid port name", s)
	}
	return nil
}

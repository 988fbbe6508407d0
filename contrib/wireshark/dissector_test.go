package wireshark

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// tsharkPrefs tell the dissector the markings of the captures (Lua uint
// preferences are decimal), and let its heuristic see INT on ports other
// dissectors claim, in segments TCP would call retransmissions.
var tsharkPrefs = []string{
	"-o", "int.dscp:" + strconv.Itoa(markDSCP), "-o", "int.dscp_mask:" + strconv.Itoa(markDSCPMask),
	"-o", "int.udp_port:" + strconv.Itoa(markUDPPort), "-o", fmt.Sprintf("int.probe_marker:%#x", uint64(markProbe)),
	"-o", "int.gre_proto:" + strconv.Itoa(markGRE),
	"-o", "tcp.try_heuristic_first:TRUE", "-o", "udp.try_heuristic_first:TRUE",
	"-o", "tcp.analyze_sequence_numbers:FALSE",
}

// decodeFlags are the same markings for `intcollector decode`.
var decodeFlags = []string{
	"-int-dscp", strconv.Itoa(markDSCP), "-int-dscp-mask", strconv.Itoa(markDSCPMask),
	"-int-udp-port", strconv.Itoa(markUDPPort), "-int-probe-marker", fmt.Sprintf("%#x", uint64(markProbe)),
	"-int-gre-proto", strconv.Itoa(markGRE),
}

// TestDissector generates a capture of every kind of INT and report packet
// the project produces (INT-MD and INT-MX over TCP/UDP with DSCP, UDP port
// NPT 1 and 2 and probe marker, in GRE, VXLAN-GPE and Geneve; postcards;
// Telemetry Report v2.0 and 0.5 flow, drop and queue reports), adds the
// peers' INT 0.5 and Telemetry Report 0.5 captures of shared/captures,
// and checks that tshark with intd.lua shows, frame by frame, every field
// `intcollector decode` shows, with the same values.
func TestDissector(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed (Debian package tshark): the dissector test is skipped")
	}
	lua, err := filepath.Abs("intd.lua")
	if err != nil {
		t.Fatal(err)
	}
	// Wireshark can refuse to run Lua (as root, in some builds): that is a
	// failure here, not a reason to skip.
	out, err := exec.Command(tshark, "-G", "protocols", "-X", "lua_script:"+lua).Output()
	if err != nil || !bytes.Contains(out, []byte("\tint_report\n")) {
		t.Fatalf("tshark did not load %s (is Lua enabled in this Wireshark?): %v", lua, err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "intcollector")
	capDir := dir
	if d := os.Getenv("INTD_CAPTURES_DIR"); d != "" {
		capDir = d // keep the generated captures
	}
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/intd-project/intd/cmd/intcollector").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	captures := writeCaptures(t, capDir)
	peers, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "captures", "*.pcap"))
	if len(peers) == 0 {
		t.Log("shared/captures not found next to the repository: peer captures not checked")
	}
	captures = append(captures, peers...)

	kinds := map[string]int{}
	for _, capture := range captures {
		name := strings.TrimSuffix(filepath.Base(capture), ".pcap")
		t.Run(name, func(t *testing.T) {
			want := decodeFrames(t, bin, capture)
			got := tsharkFrames(t, tshark, lua, capture)
			if len(got) != len(want) {
				t.Fatalf("tshark shows %d frames, intcollector decode %d", len(got), len(want))
			}
			errs := 0
			defer func() {
				if errs > 10 {
					t.Errorf("... %d differences in all", errs)
				}
			}()
			for i := range want {
				if e, ok := want[i]["error"]; ok {
					t.Errorf("frame %d: intcollector decode: %v", i+1, e)
					continue
				}
				countKinds(want[i], kinds)
				for _, d := range diff("", want[i], got[i]) {
					if errs++; errs <= 10 {
						t.Errorf("frame %d: %s", i+1, d)
					}
				}
			}
		})
	}
	// Every kind of packet was seen.
	var seen []string
	for k, n := range kinds {
		seen = append(seen, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(seen)
	t.Logf("checked: %s", strings.Join(seen, " "))
	for _, k := range []string{"int/dscp/md", "int/dscp/mx", "int/udp-port/md", "int/probe-marker/md", "int/probe-marker/mx",
		"int/gre/md", "int/gre/mx", "int/vxlan-gpe/md", "int/vxlan-gpe/mx", "int/geneve/md", "int/geneve/mx",
		"report/2/flow", "report/2/drop", "report/2/queue", "report/0/flow", "report/0/drop", "report/0/queue",
		"report/2/inner-int", "report/0/inner-int"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the captures", k)
		}
	}
}

// countKinds tallies what a decoded frame holds.
func countKinds(f map[string]any, kinds map[string]int) {
	if in, ok := f["int"].(map[string]any); ok {
		kinds[fmt.Sprintf("int/%v/%v", in["encap"], in["type"])]++
	}
	rep, ok := f["report"].(map[string]any)
	if !ok {
		return
	}
	v := rep["version"]
	for _, r := range rep["reports"].([]any) {
		r := r.(map[string]any)
		switch {
		case r["d"] == true:
			kinds[fmt.Sprintf("report/%v/drop", v)]++
		case r["q"] == true:
			kinds[fmt.Sprintf("report/%v/queue", v)]++
		default:
			kinds[fmt.Sprintf("report/%v/flow", v)]++
		}
		if in, ok := r["inner"].(map[string]any); ok && in["int"] != nil {
			kinds[fmt.Sprintf("report/%v/inner-int", v)]++
		}
	}
}

// decodeFrames runs `intcollector decode` and returns its frames, numbers
// as decimal strings.
func decodeFrames(t *testing.T, bin, capture string) []map[string]any {
	t.Helper()
	out, err := exec.Command(bin, append(append([]string{"decode"}, decodeFlags...), capture)...).Output()
	if err != nil {
		t.Fatalf("intcollector decode: %v", err)
	}
	var frames []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		var f map[string]any
		if err := d.Decode(&f); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, normalize(f).(map[string]any))
	}
	return frames
}

// normalize turns json.Numbers into decimal strings.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	case json.Number:
		return x.String()
	}
	return v
}

// tsharkFrames runs tshark with the dissector and rebuilds, for every
// frame, what `intcollector decode` would print from the dissector's
// fields.
func tsharkFrames(t *testing.T, tshark, lua, capture string) []map[string]any {
	t.Helper()
	args := append([]string{"-X", "lua_script:" + lua}, tsharkPrefs...)
	args = append(args, "-r", capture, "-T", "json", "--no-duplicate-keys")
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Lua: Error") {
		t.Fatalf("tshark: %s", stderr.String())
	}
	var pkts []struct {
		Source struct {
			Layers map[string]any `json:"layers"`
		} `json:"_source"`
	}
	if err := json.Unmarshal(out, &pkts); err != nil {
		t.Fatalf("tshark JSON: %v", err)
	}
	var frames []map[string]any
	for i, p := range pkts {
		f := map[string]any{"frame": strconv.Itoa(i + 1)}
		l := p.Source.Layers
		_, icmp := l["icmp"]
		_, icmp6 := l["icmpv6"]
		if icmp || icmp6 {
			// A report quoted in an ICMP error (port unreachable) was not
			// delivered: decode leaves it out.
		} else if r := objects(l["int_report"]); len(r) > 0 {
			f["report"] = reportJSON(r[0], l)
		} else if in := intJSON(objects(l["int"])); in != nil {
			f["int"] = in
		}
		frames = append(frames, f)
	}
	return frames
}

// objects returns the tree objects under a key (one, or several when the
// key repeats).
func objects(v any) []map[string]any {
	switch x := v.(type) {
	case map[string]any:
		return []map[string]any{x}
	case []any:
		var out []map[string]any
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}

// value is the first value of a field in obj or its _tree and grouping
// subtrees (not in other protocols' layers or repeated entities).
func value(obj map[string]any, key string, groups ...string) (string, bool) {
	if v, ok := obj[key]; ok {
		switch x := v.(type) {
		case string:
			return x, true
		case []any:
			if s, ok := x[0].(string); ok {
				return s, true
			}
		}
	}
	for _, g := range groups {
		for _, sub := range objects(obj[g]) {
			if v, ok := value(sub, key); ok {
				return v, true
			}
		}
	}
	return "", false
}

// num converts a tshark value (decimal or 0x hex) to a decimal string.
func num(s string) string {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return "bad number " + s
	}
	return strconv.FormatUint(v, 10)
}

func setNum(out map[string]any, name string, obj map[string]any, key string, groups ...string) bool {
	if v, ok := value(obj, key, groups...); ok {
		out[name] = num(v)
		return true
	}
	return false
}

func setBool(out map[string]any, name string, obj map[string]any, key string) {
	v, _ := value(obj, key)
	out[name] = v == "1"
}

var hopFields = []string{"node_id", "ingress_if", "egress_if", "hop_latency", "queue_id", "queue_occupancy",
	"ingress_timestamp", "egress_timestamp", "ingress_if_l2", "egress_if_l2", "tx_utilization", "buffer_id",
	"buffer_occupancy", "checksum_complement"}

// intJSON rebuilds decode's INT object from the dissector's int trees: the
// first one with a header (a VXLAN-GPE chain's destination shims have
// none).
func intJSON(trees []map[string]any) map[string]any {
	var in map[string]any
	for _, tr := range trees {
		if _, ok := tr["int.version"]; ok {
			in = tr
			break
		}
	}
	if in == nil {
		return nil
	}
	out := map[string]any{}
	out["encap"], _ = value(in, "int.encap")
	typ, _ := value(in, "int.type")
	out["type"] = map[string]string{"INT-MD": "md", "INT-MX": "mx", "INT-Destination": "destination"}[typ]
	setNum(out, "version", in, "int.version")
	setNum(out, "instruction_bitmap", in, "int.instruction_bitmap")
	if _, v05 := value(in, "int.v05.type", "int.shim"); v05 {
		out["d"], out["m"] = false, false
		setBool(out, "e", in, "int.v05.e")
		setNum(out, "hop_ml", in, "int.v05.inst_count")
		setNum(out, "sequence", in, "int.sequence")
	} else {
		setBool(out, "d", in, "int.d")
		setBool(out, "e", in, "int.e")
		setBool(out, "m", in, "int.m")
		if !setNum(out, "hop_ml", in, "int.hop_ml") {
			out["hop_ml"] = "0"
		}
		setNum(out, "domain_id", in, "int.domain_id")
		setNum(out, "ds_instruction", in, "int.ds_instruction")
		setNum(out, "ds_flags", in, "int.ds_flags")
	}
	if !setNum(out, "remaining_hop_count", in, "int.remaining_hop_count") {
		out["remaining_hop_count"] = "0"
	}
	hops := []any{}
	for _, h := range objects(in["int.hop"]) {
		hj := map[string]any{}
		for _, f := range hopFields {
			setNum(hj, f, h, "int.hop."+f)
		}
		hops = append(hops, hj)
	}
	out["hops"] = hops
	return out
}

// reportJSON rebuilds decode's report object from the dissector's tree.
func reportJSON(r, top map[string]any) map[string]any {
	out := map[string]any{}
	setNum(out, "version", r, "int_report.version")
	var reports []any
	if out["version"] == "2" {
		setNum(out, "hw_id", r, "int_report.hw_id")
		setNum(out, "sequence", r, "int_report.sequence")
		setNum(out, "node_id", r, "int_report.node_id")
		for _, ir := range objects(r["int_report.report"]) {
			j := map[string]any{}
			setNum(j, "rep_type", ir, "int_report.rep_type")
			setNum(j, "in_type", ir, "int_report.in_type")
			for _, fl := range []string{"d", "q", "f", "i"} {
				setBool(j, fl, ir, "int_report."+fl)
			}
			if j["rep_type"] == "1" {
				md := map[string]any{}
				for _, f := range hopFields {
					setNum(md, f, ir, "int_report.md."+f, "int_report.md")
				}
				j["md"] = md
				setNum(j, "drop_reason", ir, "int_report.drop_reason", "int_report.md")
				setNum(j, "drop_queue_id", ir, "int_report.md.drop_queue_id", "int_report.md")
				setNum(j, "domain_id", ir, "int_report.domain_id")
				setNum(j, "ds_md_bits", ir, "int_report.ds_md_bits")
				setNum(j, "ds_md_status", ir, "int_report.ds_md_status")
				if v, ok := value(ir, "int_report.ds_md"); ok {
					j["ds_metadata"] = strings.ReplaceAll(v, ":", "")
				}
			}
			innerJSON(j, ir, top)
			reports = append(reports, j)
		}
	} else {
		// Telemetry Report 0.5, shown as decode maps it onto v2.0's code
		// points: one report; drop and local headers are INT reports of an
		// Ethernet frame, Host-INT's IPv4 variant inner-only IPv4.
		setNum(out, "hw_id", r, "int_report.v05.hw_id")
		setNum(out, "sequence", r, "int_report.v05.sequence")
		out["node_id"] = "0"
		setNum(out, "node_id", r, "int_report.v05.switch_id", "int_report.v05.switch")
		setNum(out, "node_id", r, "int_report.v05.reporter_id")
		np, _ := value(r, "int_report.v05.next_proto")
		j := map[string]any{"i": false}
		for _, fl := range []string{"d", "q", "f"} {
			setBool(j, fl, r, "int_report."+fl)
		}
		codes := map[string][2]string{"0": {"0", "3"}, "1": {"1", "3"}, "2": {"1", "3"}, "3": {"0", "0"}, "4": {"0", "4"}}[np]
		j["rep_type"], j["in_type"] = codes[0], codes[1]
		md := map[string]any{}
		switch np {
		case "1", "2":
			setNum(md, "ingress_if", r, "int_report.md.ingress_if", "int_report.v05.switch")
			setNum(md, "egress_if", r, "int_report.md.egress_if", "int_report.v05.switch")
			setNum(md, "ingress_timestamp", r, "int_report.v05.ingress_timestamp")
			if np == "2" {
				setNum(md, "queue_id", r, "int_report.md.queue_id", "int_report.v05.switch")
				setNum(md, "queue_occupancy", r, "int_report.md.queue_occupancy", "int_report.v05.switch")
				setNum(md, "egress_timestamp", r, "int_report.v05.egress_timestamp", "int_report.v05.switch")
				setNum(md, "hop_latency", r, "int_report.md.hop_latency", "int_report.v05.switch")
			} else {
				setNum(j, "drop_reason", r, "int_report.drop_reason", "int_report.v05.switch")
				setNum(j, "drop_queue_id", r, "int_report.v05.drop_queue_id", "int_report.v05.switch")
			}
			j["md"] = md
		case "4":
			setNum(md, "ingress_timestamp", r, "int_report.v05.ingress_timestamp")
			j["md"] = md
		}
		innerJSON(j, r, top)
		reports = append(reports, j)
	}
	if reports == nil {
		reports = []any{}
	}
	out["reports"] = reports
	return out
}

// innerJSON adds decode's inner object for a report tree: the length, and
// for packets the original flow (the shim's original port or protocol
// where INT replaced them) and the INT stack. top is the frame's layers,
// where Wireshark's own tunnel dissectors put their trees.
func innerJSON(j, r, top map[string]any) {
	l, ok := value(r, "int_report.inner_length")
	if !ok {
		return
	}
	in := map[string]any{"length": num(l)}
	j["inner"] = in
	if it := j["in_type"]; it != "3" && it != "4" && it != "5" {
		return
	}
	var src, dst, proto string
	if ip := objects(r["ip"]); len(ip) > 0 {
		src, _ = value(ip[0], "ip.src")
		dst, _ = value(ip[0], "ip.dst")
		proto, _ = value(ip[0], "ip.proto")
	} else if ip := objects(r["ipv6"]); len(ip) > 0 {
		src, _ = value(ip[0], "ipv6.src")
		dst, _ = value(ip[0], "ipv6.dst")
		proto, _ = value(ip[0], "ipv6.nxt")
	} else {
		return
	}
	in["src"], in["dst"] = src, dst
	ints := objects(r["int"])
	// NPT 2: the original L4 header is behind the stack; the UDP header
	// carrying INT is not the flow's.
	carrier := 0
	if v, ok := value(firstOr(ints), "int.shim.ip_proto", "int.shim"); ok {
		proto, carrier = v, 1
	}
	in["proto"] = num(proto)
	// The flow of a tunnelled packet is the user's packet in the tunnel
	// (the last IP header), the outer ends apart, as decode shows them.
	inTunnel := func(user map[string]any) {
		in["outer_src"], in["outer_dst"] = src, dst
		src, _ = value(user, "ip.src")
		dst, _ = value(user, "ip.dst")
		proto, _ = value(user, "ip.proto")
		in["src"], in["dst"], in["proto"] = src, dst, num(proto)
	}
	// GTP-U behind INT over UDP.
	if g, ips := objects(r["gtp"]), objects(r["ip"]); len(g) > 0 && len(ips) > 1 {
		if teid, ok := value(g[0], "gtp.teid"); ok {
			in["tunnel"], in["tunnel_id"] = "gtpu", num(teid)
			inTunnel(ips[len(ips)-1])
		}
	}
	// INT in a VXLAN-GPE, Geneve or GRE header: the flow is the packet in
	// the tunnel too, with the tunnel's id (VNI; GRE key, or 0).
	if ips := objects(r["ip"]); len(ips) > 1 && in["tunnel"] == nil {
		if s, ok := value(ips[len(ips)-1], "ip.src"); ok && s != "" {
			kind, _ := value(firstOr(ints), "int.encap")
			id, idOK := "", false
			switch kind {
			case "vxlan-gpe":
				id, idOK = value(firstOr(objects(top["vxlan"])), "vxlan.vni")
			case "geneve":
				if id, idOK = value(firstOr(objects(r["int_geneve"])), "int_geneve.vni"); !idOK {
					id, idOK = value(firstOr(objects(top["int_geneve"])), "int_geneve.vni")
				}
			case "gre":
				if id, idOK = value(firstOr(objects(top["gre"])), "gre.key"); !idOK {
					id, idOK = "0", true
				}
			}
			if kind == "vxlan-gpe" || kind == "geneve" || kind == "gre" {
				in["tunnel"] = kind
				if idOK {
					in["tunnel_id"] = num(id)
				}
				inTunnel(ips[len(ips)-1])
			}
		}
	}
	var sport, dport string
	for _, l4 := range []string{"tcp", "udp"} {
		if p := num(proto); (l4 == "tcp" && p == "6") || (l4 == "udp" && p == "17") {
			if o := objects(r[l4]); len(o) > 0 && (l4 == "tcp" || len(o) > carrier) {
				sport, _ = value(o[len(o)-1], l4+".srcport")
				dport, _ = value(o[len(o)-1], l4+".dstport")
			}
		}
	}
	if v, ok := value(firstOr(ints), "int.shim.udp_port", "int.shim"); ok {
		dport = v
	}
	if sport != "" {
		in["src_port"], in["dst_port"] = num(sport), num(dport)
	}
	if ij := intJSON(ints); ij != nil {
		in["int"] = ij
	}
}

func firstOr(o []map[string]any) map[string]any {
	if len(o) == 0 {
		return map[string]any{}
	}
	return o[0]
}

// diff lists the differences between decode's value a and the dissector's
// b, by path.
func diff(path string, a, b any) []string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: decode %v, dissector %v", orRoot(path), short(a), short(b))}
		}
		var out []string
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		var sorted []string
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if k == "error" { // decode's inner error has no dissector counterpart
				continue
			}
			av, aok := x[k]
			bv, bok := y[k]
			switch {
			case !bok:
				if _, skip := x["error"]; skip {
					continue // an embedded packet decode could not parse: only its length is compared
				}
				out = append(out, fmt.Sprintf("%s.%s: decode %v, missing in the dissector", path, k, short(av)))
			case !aok:
				if _, skip := x["error"]; skip {
					continue
				}
				out = append(out, fmt.Sprintf("%s.%s: dissector %v, missing in decode", path, k, short(bv)))
			default:
				out = append(out, diff(path+"."+k, av, bv)...)
			}
		}
		return out
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return []string{fmt.Sprintf("%s: decode %v, dissector %v", orRoot(path), short(a), short(b))}
		}
		var out []string
		for i := range x {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{fmt.Sprintf("%s: decode %v, dissector %v", orRoot(path), a, b)}
	}
	return nil
}

func orRoot(p string) string {
	if p == "" {
		return "frame"
	}
	return p
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

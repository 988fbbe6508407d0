package ebpf

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/intd-project/intd/dataplane/report"
	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai"
	"github.com/intd-project/intd/sai/spec"
)

// evState turns ring buffer records into report.Events.
type evState struct {
	mu       sync.Mutex
	parser   wire.Parser
	inner    wire.Parser
	buf      []byte
	innerPkt wire.Packet // a tunnelled packet's inner packet
	ev       report.Event
	// sinks are the ifindexes of sink ports: what comes in there is not
	// INT, whatever its marking.
	sinks map[uint32]bool
	// adaptive: the BPF flow filter runs the adaptive latency band.
	adaptive bool
}

func (e *evState) setParser(dt *sai.DTelAttrs, sinks map[uint32]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sinks = sinks
	e.parser = wire.Parser{AllowTruncated: true}
	e.adaptive = dt != nil && dt.FlowReport.Adaptive
	if dt != nil {
		e.parser.DSCP, e.parser.DSCPMask = dt.IntL4DSCP.Value, dt.IntL4DSCP.Mask
		e.parser.UDPPort = dt.IntUDPDstPort
		e.parser.GREProto = dt.GREProtocolType
		e.parser.ProbeMarker = dt.ProbeMarker
		if dt.VXLANGPENextProtocol != 0 {
			e.parser.VXLANGPEPort = spec.PortVXLANGPE
		}
		if dt.GeneveOptionClass != 0 {
			e.parser.GenevePort = spec.PortGeneve
		}
	}
	e.inner = wire.Parser{AllowTruncated: true}
}

func (d *Dataplane) readEvents() {
	defer close(d.done)
	var rec ringbuf.Record
	for {
		// The BPF side wakes the reader at most once a millisecond per
		// CPU (BPF_RB_NO_WAKEUP otherwise): poll for the rest. Once
		// Close asks, read what is left without waiting.
		stopping := d.stopping.Load()
		if stopping {
			d.rd.SetDeadline(time.Now())
		} else {
			d.rd.SetDeadline(time.Now().Add(10 * time.Millisecond))
		}
		if err := d.rd.ReadInto(&rec); err != nil {
			if errors.Is(err, ringbuf.ErrClosed) || stopping && errors.Is(err, os.ErrDeadlineExceeded) {
				return
			}
			continue
		}
		if len(rec.RawSample) < int(unsafe.Sizeof(intdEvent{})) {
			continue
		}
		raw := (*intdEvent)(unsafe.Pointer(&rec.RawSample[0]))
		if d.cfg.Reporter != nil {
			d.ev.deliver(raw, d.cfg.Reporter)
		}
	}
}

// deliver converts one record and hands it to r.
func (e *evState) deliver(raw *intdEvent, r report.Reporter) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev := e.convert(raw)
	if ev != nil {
		r.Report(ev)
		ev.Packet = nil
	}
}

func hopOf(raw *intdEvent) wire.HopMetadata {
	return wire.HopMetadata{
		NodeID:           raw.NodeId,
		IngressPort:      raw.L1In,
		EgressPort:       raw.L1Out,
		HopLatency:       raw.HopLatency,
		QueueID:          uint8(raw.QueueOcc >> 24),
		TxUtilization:    raw.TxUtil,
		BufferOccupancy:  raw.BufOcc & 0xffffff,
		QueueOccupancy:   raw.QueueOcc & 0xffffff,
		IngressTimestamp: raw.TsIn,
		EgressTimestamp:  raw.Now,
		L2IngressPort:    raw.L2In,
		L2EgressPort:     raw.L2Out,
		Valid:            wire.Instructions(raw.Valid),
	}
}

// dropHop keeps the metadata a drop report has on both dataplanes: the
// node id, interfaces (the egress ids all ones when the packet had none
// yet) and ingress time when intd_ingress saw the packet, and for a tail
// drop the queue when the dataplane read it; a dropped packet never left,
// so it has no hop latency or egress time.
func dropHop(h *wire.HopMetadata, tail bool) {
	keep := spec.InstNodeID | spec.InstL1Interfaces | spec.InstL2Interfaces | spec.InstIngressTimestamp
	if tail {
		keep |= spec.InstQueue | spec.InstBuffer
	}
	h.Valid &= keep
	if h.EgressPort == 0 && h.L2EgressPort == 0 {
		h.EgressPort, h.L2EgressPort = 0xffff, wire.Unavailable32
	}
}

// convert builds the report.Event for a record. For a sink record the
// frame is as received and this hop's metadata is pushed onto its stack
// here, as the software dataplane does (LastHopEmbeddedInt).
func (e *evState) convert(raw *intdEvent) *report.Event {
	n := int(min(raw.CapLen, uint16(len(raw.Data))))
	if cap(e.buf) < n+wire.EthernetLen+512 {
		e.buf = make([]byte, 0, n+wire.EthernetLen+2048)
	}
	b := e.buf[:0]
	if raw.L3Off == 0 { // drop: IP packet, give it an Ethernet header
		if n > 0 && raw.Data[0]>>4 == 6 {
			b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x86, 0xdd)
		} else {
			b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00)
		}
	}
	b = append(b, raw.Data[:n]...)
	ev := &e.ev
	*ev = report.Event{Kind: report.Kind(raw.Kind), Now: int64(raw.Now), Hop: hopOf(raw), INT: -1,
		DropReason: raw.DropReason, TCPFlags: raw.TcpFlags}
	ev.ReportAll = raw.Flags&uint8(intdEventFlagEVF_REPORT_ALL) != 0
	ev.Unwatched = raw.Flags&uint8(intdEventFlagEVF_UNWATCHED) != 0
	ev.TailDrop = raw.Flags&uint8(intdEventFlagEVF_TAIL_DROP) != 0
	ev.TailDropReport = raw.Flags&uint8(intdEventFlagEVF_TAIL_DROP_REPORT) != 0
	if raw.Flags&uint8(intdEventFlagEVF_INST) != 0 {
		ev.Instructions, ev.HasInstructions = wire.Instructions(raw.Inst), true
		ev.DomainID, ev.DSInstructions = raw.Domain, raw.DsInst
	}
	// In the adaptive mode the BPF filter judged every flow event's
	// latencies (report-all events skip the filter here too).
	ev.LatencyJudged = e.adaptive && ev.Kind == report.KindFlow && !ev.ReportAll
	ev.LatencyAnomaly = raw.Flags&uint8(intdEventFlagEVF_LAT_ANOMALY) != 0
	var p wire.Packet
	pr := &e.parser
	if ev.Kind == report.KindDrop {
		dropHop(&ev.Hop, ev.TailDrop)
		if e.sinks[raw.InIfindex] {
			pr = &e.inner // from outside the domain: not INT
		}
	}
	err := pr.Parse(b, &p)
	if err != nil && pr != &e.inner {
		pr = &e.inner
		err = pr.Parse(b, &p)
	}
	if err != nil {
		ev.Packet = b
		return ev
	}
	if raw.Flags&uint8(intdEventFlagEVF_SINK) != 0 && p.INT >= 0 && p.INTType == spec.TypeMD {
		if out, err := wire.PushHop(b, &p, &ev.Hop, wire.PushOptions{}); err == nil || err == wire.ErrHopLimit {
			b = out
		}
	}
	ev.Packet = b
	ev.Flow = p.Flow
	if p.Proto == wire.ProtoGRE || p.Proto == wire.ProtoUDP {
		// A tunnel's flows are its inner ones, as the software
		// dataplane's and the collector's: drops too, so that two users
		// in one tunnel dropped for one reason are two reports.
		if t, ok := wire.FlowInner(b, &p, &e.innerPkt); ok {
			ev.Flow, ev.Tunnel, ev.TunnelID = e.innerPkt.Flow, t.Kind, t.ID
		}
	}
	if p.INT >= 0 {
		ev.INT, ev.INTType, ev.INTLen = p.INT, p.INTType, p.INTLen
	}
	return ev
}

// dropReasonMap maps kernel skb_drop_reason names (without the
// SKB_DROP_REASON_ prefix) to sai drop reasons.
var dropReasonMap = map[string]sai.DropReason{
	"IP_INNOROUTES":      spec.DropRoutingMiss,
	"IP_OUTNOROUTES":     spec.DropRoutingMiss,
	"IP_INADDRERRORS":    spec.DropRoutingMiss,
	"NETFILTER_DROP":     spec.DropACLDeny,
	"TC_INGRESS":         spec.DropACLDeny,
	"TC_EGRESS":          spec.DropACLDeny,
	"TC_DROP":            spec.DropACLDeny,
	"XDP":                spec.DropACLDeny,
	"QDISC_DROP":         spec.DropTrafficManager,
	"QDISC_OVERLIMIT":    spec.DropTrafficManager,
	"QDISC_CONGESTED":    spec.DropTrafficManager,
	"QDISC_MAXFLOWS":     spec.DropTrafficManager,
	"FQ_BAND_LIMIT":      spec.DropTrafficManager,
	"FQ_HORIZON_LIMIT":   spec.DropTrafficManager,
	"FQ_FLOW_LIMIT":      spec.DropTrafficManager,
	"FQ_CODEL_OVERLIMIT": spec.DropTrafficManager,
	"CAKE_FLOOD":         spec.DropTrafficManager,
	"SFB_DROP":           spec.DropTrafficManager,
	"TXQUEUE_FULL":       spec.DropTrafficManager,
	"DEV_READY":          spec.DropTrafficManager,
	"FULL_RING":          spec.DropTrafficManager,
	"NEIGH_FAILED":       spec.DropNextIDMiss,
	"NEIGH_QUEUEFULL":    spec.DropNextIDMiss,
	"VLAN_FILTER":        spec.DropPortVLANMappingMiss,
	"UNHANDLED_PROTO":    spec.DropBridgingMiss,
	// Tunnels (docs/tunnels.md): a VNI no VXLAN device terminates
	// is the overlay's unexpected VLAN; a VXLAN frame with no FDB entry
	// or remote to send it to a bridging miss.
	"VXLAN_VNI_NOT_FOUND": spec.DropPortVLANMappingMiss,
	"NO_TX_TARGET":        spec.DropBridgingMiss,
}

// loadDropReasons reads the kernel's enum skb_drop_reason from BTF and fills
// the drop_reasons map (kernel value -> sai reason + 1).
func (d *Dataplane) loadDropReasons() error {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil // no BTF: every drop is "unknown"
	}
	var enum *btf.Enum
	if err := spec.TypeByName("skb_drop_reason", &enum); err != nil {
		return nil
	}
	for _, v := range enum.Values {
		name := strings.TrimPrefix(v.Name, "SKB_DROP_REASON_")
		r, ok := uint32(0), false
		if name == "IP_INHDR" {
			// Header error: ip_forward drops an expired TTL with it,
			// so the program reports spec.DropIPTTLZero when the TTL
			// is 0 or 1 and spec.DropUnknown otherwise.
			r, ok = uint32(intdDropMapDR_IP_HDR), true
		} else if name == "NO_SOCKET" {
			// A GTP-U G-PDU (UDP 2152) no endpoint here takes: the
			// program reports spec.DropUPFUplinkPDRMiss, for other
			// packets spec.DropUnknown.
			r, ok = uint32(intdDropMapDR_NO_SOCKET), true
		} else if sr, found := dropReasonMap[name]; found {
			r, ok = uint32(sr), true
		}
		if !ok || v.Value >= 512 {
			continue
		}
		if err := d.objs.DropReasons.Put(uint32(v.Value), r+1); err != nil {
			return fmt.Errorf("ebpf: drop reasons: %w", err)
		}
	}
	return nil
}

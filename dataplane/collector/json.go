package collector

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"time"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/dataplane/wire/pcap"
	"github.com/intd-project/intd/sai/spec"
)

// The JSON form of decoded packets, used by `intcollector decode` and by
// the collector's --json output. Field names are stable.

// HopJSON is one hop's metadata (or a report's own metadata); only the
// fields present in the packet are set.
type HopJSON struct {
	NodeID             *uint32 `json:"node_id,omitempty"`
	IngressIf          *uint16 `json:"ingress_if,omitempty"`
	EgressIf           *uint16 `json:"egress_if,omitempty"`
	HopLatency         *uint32 `json:"hop_latency,omitempty"`
	QueueID            *uint8  `json:"queue_id,omitempty"`
	QueueOccupancy     *uint32 `json:"queue_occupancy,omitempty"`
	IngressTimestamp   *uint64 `json:"ingress_timestamp,omitempty"`
	EgressTimestamp    *uint64 `json:"egress_timestamp,omitempty"`
	IngressIfL2        *uint32 `json:"ingress_if_l2,omitempty"`
	EgressIfL2         *uint32 `json:"egress_if_l2,omitempty"`
	TxUtilization      *uint32 `json:"tx_utilization,omitempty"`
	BufferID           *uint8  `json:"buffer_id,omitempty"`
	BufferOccupancy    *uint32 `json:"buffer_occupancy,omitempty"`
	ChecksumComplement *uint32 `json:"checksum_complement,omitempty"`
}

// INTJSON is an INT header and stack.
type INTJSON struct {
	Encap             string    `json:"encap"`
	Type              string    `json:"type"`
	Version           uint8     `json:"version"`
	D                 bool      `json:"d"`
	E                 bool      `json:"e"`
	M                 bool      `json:"m"`
	HopML             uint8     `json:"hop_ml"`
	RemainingHopCount uint8     `json:"remaining_hop_count"`
	InstructionBitmap uint16    `json:"instruction_bitmap"`
	DomainID          *uint16   `json:"domain_id,omitempty"`
	DSInstruction     *uint16   `json:"ds_instruction,omitempty"`
	DSFlags           *uint16   `json:"ds_flags,omitempty"`
	Sequence          *uint32   `json:"sequence,omitempty"` // Host-INT flow sequence number
	Hops              []HopJSON `json:"hops"`
}

// InnerJSON is a report's embedded packet.
type InnerJSON struct {
	Src     string  `json:"src,omitempty"`
	Dst     string  `json:"dst,omitempty"`
	Proto   *uint8  `json:"proto,omitempty"`
	SrcPort *uint16 `json:"src_port,omitempty"`
	DstPort *uint16 `json:"dst_port,omitempty"`
	Length  int     `json:"length"`
	// Tunnelled packets: the flow above is the inner packet's.
	Tunnel   string   `json:"tunnel,omitempty"`
	TunnelID *uint32  `json:"tunnel_id,omitempty"`
	OuterSrc string   `json:"outer_src,omitempty"`
	OuterDst string   `json:"outer_dst,omitempty"`
	INT      *INTJSON `json:"int,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// IndividualJSON is one individual report.
type IndividualJSON struct {
	RepType     uint8    `json:"rep_type"`
	InType      uint8    `json:"in_type"`
	D           bool     `json:"d"`
	Q           bool     `json:"q"`
	F           bool     `json:"f"`
	I           bool     `json:"i"`
	MD          *HopJSON `json:"md,omitempty"`
	DropReason  *uint8   `json:"drop_reason,omitempty"`
	DropQueueID *uint8   `json:"drop_queue_id,omitempty"`
	DomainID    *uint16  `json:"domain_id,omitempty"`
	DSMdBits    *uint16  `json:"ds_md_bits,omitempty"`
	DSMdStatus  *uint16  `json:"ds_md_status,omitempty"`
	// DSMetadata is the domain-specific report metadata, in hex.
	DSMetadata string     `json:"ds_metadata,omitempty"`
	Inner      *InnerJSON `json:"inner,omitempty"`
}

// ReportJSON is a telemetry report packet.
type ReportJSON struct {
	Version  uint8            `json:"version"`
	HWID     uint8            `json:"hw_id"`
	Sequence uint32           `json:"sequence"`
	NodeID   uint32           `json:"node_id"`
	Reports  []IndividualJSON `json:"reports"`
	Error    string           `json:"error,omitempty"`
}

// FrameJSON is one line of `intcollector decode` output.
type FrameJSON struct {
	Frame  int         `json:"frame"`
	INT    *INTJSON    `json:"int,omitempty"`
	Report *ReportJSON `json:"report,omitempty"`
	Error  string      `json:"error,omitempty"`
}

func p[T any](v T) *T { return &v }

// HopToJSON converts hop metadata, keeping the fields in m.Valid.
func HopToJSON(m *wire.HopMetadata, node bool) HopJSON {
	var h HopJSON
	v := m.Valid
	if node && v&spec.InstNodeID != 0 {
		h.NodeID = p(m.NodeID)
	}
	if v&spec.InstL1Interfaces != 0 {
		h.IngressIf, h.EgressIf = p(m.IngressPort), p(m.EgressPort)
	}
	if v&spec.InstHopLatency != 0 {
		h.HopLatency = p(m.HopLatency)
	}
	if v&spec.InstQueue != 0 {
		h.QueueID, h.QueueOccupancy = p(m.QueueID), p(m.QueueOccupancy)
	}
	if v&spec.InstIngressTimestamp != 0 {
		h.IngressTimestamp = p(m.IngressTimestamp)
	}
	if v&spec.InstEgressTimestamp != 0 {
		h.EgressTimestamp = p(m.EgressTimestamp)
	}
	if v&spec.InstL2Interfaces != 0 {
		h.IngressIfL2, h.EgressIfL2 = p(m.L2IngressPort), p(m.L2EgressPort)
	}
	if v&spec.InstEgressTxUtil != 0 {
		h.TxUtilization = p(m.TxUtilization)
	}
	if v&spec.InstBuffer != 0 {
		h.BufferID, h.BufferOccupancy = p(m.BufferID), p(m.BufferOccupancy)
	}
	if v&spec.InstChecksumComplement != 0 {
		h.ChecksumComplement = p(m.ChecksumComplement)
	}
	return h
}

// INTToJSON converts a decoded INT stack.
func INTToJSON(st *INTStack) *INTJSON {
	if !st.Present {
		return nil
	}
	typ := "" // none for the legacy formats
	if st.Type.Valid() {
		typ = st.Type.String()
	}
	j := &INTJSON{
		Encap: st.Encap.String(), Type: typ, Version: st.Version,
		D: st.D, E: st.E, M: st.M, HopML: st.HopML, RemainingHopCount: st.RemainingHops,
		InstructionBitmap: uint16(st.Instructions), Hops: []HopJSON{},
	}
	if st.Format == INTv21 {
		j.DomainID, j.DSInstruction, j.DSFlags = p(st.DomainID), p(st.DSInstructions), p(st.DSFlags)
	}
	if st.HasSeq {
		j.Sequence = p(st.Seq)
	}
	for i := range st.Hops {
		j.Hops = append(j.Hops, HopToJSON(&st.Hops[i], true))
	}
	return j
}

// ReportToJSON converts one individual report.
func ReportToJSON(r *Report) IndividualJSON {
	j := IndividualJSON{RepType: uint8(r.RepType), InType: uint8(r.InType), D: r.D, Q: r.Q, F: r.F, I: r.I}
	if r.HasMD {
		md := HopToJSON(&r.MD, false)
		j.MD = &md
	}
	if r.HasDrop {
		j.DropReason, j.DropQueueID = p(r.DropReason), p(r.DropQueueID)
	}
	if r.Version == wire.Version2 && r.RepType == spec.RepINT {
		j.DomainID, j.DSMdBits, j.DSMdStatus = p(r.DomainID), p(r.DSMdBits), p(r.DSStatus)
		if len(r.DS) > 0 {
			j.DSMetadata = hex.EncodeToString(r.DS)
		}
	}
	if len(r.Inner) > 0 && (r.InType == spec.InEthernet || r.InType == spec.InIPv4 || r.InType == spec.InIPv6) {
		in := &InnerJSON{Length: len(r.Inner), INT: INTToJSON(&r.INT)}
		if r.HasFlow {
			in.Src, in.Dst, in.Proto = r.Flow.Src.String(), r.Flow.Dst.String(), p(r.Flow.Proto)
			if (r.Flow.Proto == wire.ProtoTCP || r.Flow.Proto == wire.ProtoUDP) && !r.NoPorts {
				in.SrcPort, in.DstPort = p(r.Flow.SrcPort), p(r.Flow.DstPort)
			}
			if r.Tunnel != wire.TunnelNone {
				in.Tunnel, in.TunnelID = r.Tunnel.String(), p(r.TunnelID)
				in.OuterSrc, in.OuterDst = r.Outer.Src.String(), r.Outer.Dst.String()
			}
		}
		if r.InnerErr != nil {
			in.Error = r.InnerErr.Error()
		}
		j.Inner = in
	} else if len(r.Inner) > 0 {
		j.Inner = &InnerJSON{Length: len(r.Inner)}
	}
	return j
}

// reportCollector gathers the reports of one packet as JSON.
type reportCollector struct{ out *ReportJSON }

func (c *reportCollector) HandleReport(r *Report) {
	if len(c.out.Reports) == 0 {
		c.out.Version, c.out.HWID, c.out.Sequence, c.out.NodeID = r.Version, r.HWID, r.Seq, r.NodeID
	}
	c.out.Reports = append(c.out.Reports, ReportToJSON(r))
}

// PayloadToJSON decodes a telemetry report payload into its JSON form.
func (d *Decoder) PayloadToJSON(payload []byte) *ReportJSON {
	out := &ReportJSON{Reports: []IndividualJSON{}}
	_, err := d.Decode(payload, &reportCollector{out})
	if len(out.Reports) == 0 && len(payload) >= 8 {
		// Keep the header fields visible for a malformed packet.
		if payload[0]>>4 == wire.Version2 {
			g, _ := wire.DecodeGroupHeader(payload)
			out.Version, out.HWID, out.Sequence, out.NodeID = g.Version, g.HWID, g.Seq, g.NodeID
		} else {
			out.Version, out.Sequence = payload[0]>>4, binary.BigEndian.Uint32(payload[4:])
		}
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

// FrameDecoder turns captured Ethernet frames into FrameJSON: UDP datagrams
// to one of ReportPorts are telemetry reports; other frames are searched
// for INT.
type FrameDecoder struct {
	*Decoder
	ReportPorts []uint16
}

// NewFrameDecoder returns a decoder for frames with reports on port.
func NewFrameDecoder(port uint16) *FrameDecoder {
	return &FrameDecoder{Decoder: NewDecoder(), ReportPorts: []uint16{port}}
}

// DecodeFrame decodes frame number n.
func (f *FrameDecoder) DecodeFrame(n int, frame []byte) FrameJSON {
	out := FrameJSON{Frame: n}
	var pk wire.Packet
	var plain wire.Parser
	if err := plain.Parse(frame, &pk); err == nil && pk.Proto == wire.ProtoUDP && pk.L4 >= 0 && pk.Flow.Proto == wire.ProtoUDP {
		for _, port := range f.ReportPorts {
			if pk.Flow.DstPort == port {
				out.Report = f.PayloadToJSON(frame[pk.L4+wire.UDPLen : pk.End])
				return out
			}
		}
	}
	var st INTStack
	_, _, err := f.Decoder.DecodeFrame(frame, &st)
	out.INT = INTToJSON(&st)
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

// DecodePcap writes one JSON line per frame of the capture in r.
func (f *FrameDecoder) DecodePcap(r io.Reader, w io.Writer) error {
	rd, err := pcap.NewReader(r)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	for n := 1; ; n++ {
		pk, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var fj FrameJSON
		if pk.LinkType != pcap.LinkTypeEthernet {
			fj = FrameJSON{Frame: n, Error: "unsupported link type"}
		} else {
			fj = f.DecodeFrame(n, pk.Data)
		}
		if err := enc.Encode(fj); err != nil {
			return err
		}
	}
}

// JSONLines writes every report a collector handles as one JSON line on
// a writer: {"report": ...} with the report's group header and that one
// report. Lines are buffered and flushed every interval and on Close.
type JSONLines struct {
	c    *Collector
	w    *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

// WriteJSONLines sets c's OnReport to write every report to w, flushed
// every interval. Call it before c serves; Close flushes and stops.
func WriteJSONLines(c *Collector, w io.Writer, every time.Duration) *JSONLines {
	j := &JSONLines{c: c, w: bufio.NewWriter(w), stop: make(chan struct{}), done: make(chan struct{})}
	enc := json.NewEncoder(j.w)
	c.OnReport = func(r *Report) {
		enc.Encode(struct {
			Report ReportJSON `json:"report"`
		}{ReportJSON{Version: r.Version, HWID: r.HWID, Sequence: r.Seq, NodeID: r.NodeID,
			Reports: []IndividualJSON{ReportToJSON(r)}}})
	}
	go func() {
		defer close(j.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.Do(func() { j.w.Flush() })
			case <-j.stop:
				return
			}
		}
	}()
	return j
}

// Close stops the periodic flush and writes what is buffered.
func (j *JSONLines) Close() error {
	close(j.stop)
	<-j.done
	var err error
	j.c.Do(func() { err = j.w.Flush() })
	return err
}

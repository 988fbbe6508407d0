// Package wire encodes and decodes the packet formats of In-band Network
// Telemetry: INT v2.1 shims and headers, the INT-MD metadata stack, the
// Telemetry Report v2.0 format, and (decode only) the legacy INT 2016,
// INT 0.5 and Telemetry Report 0.5 formats used by older INT hosts. It
// knows nothing of configuration, YANG or gNMI.
//
// Everything works in place on []byte and allocates nothing per packet:
// decoders return small values or sub-slices of their input, encoders
// write into caller buffers (Put) or append to them (Append*), and the
// dataplane edits (InsertINT, PushHop, Strip) shift bytes inside the frame
// and keep the IPv4 header checksum and the TCP/UDP checksum valid with
// incremental updates (RFC 1624), leaving zero UDP checksums zero
// (RFC 768, RFC 6936). Hot paths return the sentinel errors of errors.go
// unwrapped.
//
// # Finding INT
//
// A Parser holds the domain's marking (DSCP value/mask, INT UDP port,
// probe marker, GRE protocol, VXLAN-GPE and Geneve ports). Parser.Parse
// (Ethernet) and Parser.ParseIP fill a Packet with the offsets of L2, L3,
// L4, the tunnel header, the INT shim and the INT header, the
// encapsulation, and the flow's original 5-tuple (FlowKey, hashable with
// FlowKey.Hash; FlowKey.EntropyPort gives the NPT 2 source port).
//
// # Headers
//
// Shim, GREShim, GPEShim and GeneveOption are the four INT shims;
// MDHeader and MXHeader the INT headers; Instructions the bitmap, with
// per-bit widths (spec.FieldWords, Instructions.Words). PutHop and DecodeHop
// encode one hop's HopMetadata in bitmap order, with all-ones for
// unavailable or reserved fields and the checksum complement last;
// MDStack / DecodeMD split a stack into hops and source-only metadata.
//
// # Telemetry reports
//
// AppendGroupHeader and AppendReport build a report packet payload,
// coalescing several individual reports in one buffer; AppendTLV builds
// TLV inner contents. NewReportReader and ReportReader.Next iterate over
// the individual reports of a payload, Report.Baseline decodes the
// baseline metadata, and TLVReader walks TLVs.
//
// # Legacy formats
//
// DecodeINT05 (INT 0.5 over TCP/UDP, including Host-INT's sequence number
// and tail header), Decode2016GPE / Decode2016Geneve (INT 2016) and
// DecodeTR05 (Telemetry Report 0.5, switch-local/drop headers and the
// Host-INT IPv4 variant). legacy.go explains how the INT 0.5 layout was
// derived from the 2016 spec and the peer captures.
//
// # Where the specs are inconsistent
//
//   - Geneve examples: Opt Len must count the option header, so it is 10
//     (MD) and 4 (MX), not 9 as the figures show.
//   - Telemetry report with domain-specific metadata: MD Length covers the
//     domain-specific metadata, so it is 3, not 2.
//   - INT over GRE: Strip removes INT and restores the GRE protocol type;
//     removing a GRE encapsulation the source added (G=1) is left to the
//     caller. A GRE checksum, if present, is not updated.
//
// # Performance
//
// PutHop and DecodeHop are unrolled in bitmap order, PushHop has a fast
// path for the common case and Strip and InsertINT sum the bytes they move
// in 64-bit words; FuzzPushHopFastPath, FuzzHopCodecReference and
// FuzzSum64 check that the fast paths give the general paths' bytes.
// TestZeroAllocs asserts the zero allocations. Measured figures and their
// history: docs/performance.md.
package wire

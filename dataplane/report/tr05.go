package report

import (
	"encoding/binary"

	"github.com/intd-project/intd/dataplane/wire"
	"github.com/intd-project/intd/sai/spec"
)

// AppendTR05 appends a Telemetry Report 0.5 packet (the UDP payload) to
// dst: the 12-byte header, then for NextProto spec.TR05Local or
// spec.TR05Drop the switch-local or drop header from sw, then inner (the
// Ethernet frame). wire has only the decoder (wire.DecodeTR05).
func AppendTR05(dst []byte, h *wire.TR05Header, sw *wire.TR05Switch, inner []byte) []byte {
	var flags uint8
	if h.Dropped {
		flags |= 0x80
	}
	if h.Congested {
		flags |= 0x40
	}
	if h.TrackedFlow {
		flags |= 0x20
	}
	dst = append(dst, h.Version<<4|uint8(h.NextProto)&0x0f, flags, 0, h.HWID&0x3f)
	dst = binary.BigEndian.AppendUint32(dst, h.Seq)
	dst = binary.BigEndian.AppendUint32(dst, h.IngressTimestamp)
	switch h.NextProto {
	case spec.TR05Local, spec.TR05Drop:
		dst = binary.BigEndian.AppendUint32(dst, sw.SwitchID)
		dst = binary.BigEndian.AppendUint16(dst, sw.IngressPort)
		dst = binary.BigEndian.AppendUint16(dst, sw.EgressPort)
		if h.NextProto == spec.TR05Local {
			dst = binary.BigEndian.AppendUint32(dst, uint32(sw.QueueID)<<24|sw.QueueOccupancy&0xffffff)
			dst = binary.BigEndian.AppendUint32(dst, sw.EgressTimestamp)
		} else {
			dst = append(dst, sw.QueueID, sw.DropReason, 0, 0)
		}
	}
	return append(dst, inner...)
}

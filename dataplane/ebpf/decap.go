package ebpf

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// bpf_skb_adjust_room flags (uapi linux/bpf.h).
const (
	adjRoomMAC        = 1       // BPF_ADJ_ROOM_MAC
	adjRoomDecapIPv4  = 1 << 7  // BPF_F_ADJ_ROOM_DECAP_L3_IPV4
	adjRoomDecapL4UDP = 1 << 10 // BPF_F_ADJ_ROOM_DECAP_L4_UDP
)

// decapClearsUDPTunnel reports whether this kernel's bpf_skb_adjust_room
// takes BPF_F_ADJ_ROOM_DECAP_L4_UDP, which also clears a super-packet's
// UDP tunnel GSO type and encapsulation flag on decapsulation (the session
// tunnel's sink asks for it first); older kernels refuse the flag, and the
// sink hands super-packets to the kernel's tunnel receive instead
// (tunDev).
func decapClearsUDPTunnel() bool { return decapTakes(adjRoomDecapIPv4 | adjRoomDecapL4UDP) }

// decapTakes reports whether bpf_skb_adjust_room removes outer IPv4, UDP
// and VXLAN-GPE from a test frame with these flags.
func decapTakes(flags int64) bool {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:    ebpf.SchedCLS,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R2, -(20 + 8 + 8)),
			asm.Mov.Imm(asm.R3, adjRoomMAC),
			asm.LoadImm(asm.R4, flags, asm.DWord),
			asm.FnSkbAdjustRoom.Call(),
			asm.Return(),
		},
	})
	if err != nil {
		return false
	}
	defer prog.Close()
	f := make([]byte, 14+36+20+8)
	f[12], f[13] = 0x08, 0x00
	ip := func(h []byte, proto byte, n int) {
		h[0], h[2], h[3], h[6], h[8], h[9] = 0x45, byte(n>>8), byte(n), 0x40, 64, proto
	}
	ip(f[14:], 17, len(f)-14)
	u := f[34:]
	u[2], u[3], u[4], u[5] = 0x12, 0xb6, 0, byte(len(f)-34) // UDP to 4790
	u[8], u[11] = 0x0c, 1                                   // VXLAN-GPE, next protocol IPv4
	ip(f[50:], 17, 28)
	ret, err := prog.Run(&ebpf.RunOptions{Data: f})
	return err == nil && ret == 0
}

// Package ebpf is intd's tc/eBPF INT dataplane: the Linux kernel forwards,
// and BPF programs on tc clsact hooks do the INT work. It implements
// sai.Backend.
package ebpf

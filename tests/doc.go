// Package tests holds intd's end-to-end tests: real intd and intcollector
// processes in network namespaces joined by veth pairs, configured only
// through gNMI, with real traffic. They need root and iproute2 and skip
// otherwise.
//
//	go test -count=1 -v ./tests/             # the end-to-end test
//	make bench-soft bench-ebpf               # interleaved throughput ratios (soft, tc/eBPF)
package tests

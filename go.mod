module github.com/intd-project/intd

go 1.26.8

require (
	bitbucket.org/creachadair/stringset v0.0.14 // indirect
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/golang/glog v1.2.5 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/openconfig/gnmi v0.14.1 // indirect
	github.com/openconfig/goyang v1.6.3 // indirect
	github.com/openconfig/ygot v0.36.0 // indirect
	github.com/pborman/getopt v1.1.0 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/exp v0.0.0-20251009144603-d2f985daa21b // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

tool (
	github.com/cilium/ebpf/cmd/bpf2go
	github.com/openconfig/ygot/generator
)

# intd build, test and code generation.
GO        ?= go
YANG      := yang/intd-int.yang yang/intd-int-metadata-semantics.yang
GEN_FLAGS := -path=yang -output_file=gen/intd.go -package_name=gen \
	-generate_fakeroot -fakeroot_name=device -compress_paths=false \
	-typedef_enum_with_defmod -generate_append -generate_getters \
	-generate_delete -generate_leaf_getters -generate_populate_defaults \
	-generate_simple_unions -include_model_data -generate_rename

.PHONY: all generate build test lint bench run check-generated

all: build

# Paths are left uncompressed so that every container of the model (config
# and state alike) can be addressed by gNMI Get and Set.
generate:
	$(GO) tool generator $(GEN_FLAGS) $(YANG)
	# Keep the module cache location out of the generated header.
	sed -i "s#$$($(GO) env GOMODCACHE)/##g" gen/intd.go
	gofmt -w gen/intd.go
	sh gen/versions.sh $(YANG) > gen/versions.go
	gofmt -w gen/versions.go
	mkdir -p gen/collector
	$(GO) tool generator -path=yang -output_file=gen/collector/collector.go -package_name=collector \
		-generate_fakeroot -fakeroot_name=device -compress_paths=false \
		-typedef_enum_with_defmod -generate_append -generate_getters \
		-generate_delete -generate_leaf_getters -generate_populate_defaults \
		-generate_simple_unions -include_model_data -generate_rename yang/intd-collector.yang
	sed -i "s#$$($(GO) env GOMODCACHE)/##g" gen/collector/collector.go
	gofmt -w gen/collector/collector.go
	# BPF objects of the tc/eBPF dataplane (bpf2go; needs clang and llvm-strip).
	$(GO) generate ./dataplane/ebpf

# Fails when `make generate` would change what is committed.
check-generated: generate
	git diff --exit-code -- gen/ dataplane/ebpf

build:
	$(GO) build ./...

lint:
	yanglint -p yang $(YANG)
	yanglint -p yang -t config $(YANG) yang/examples/*.json
	yanglint -p yang yang/intd-collector.yang
	gofmt -l . | grep -v '^gen/' | (! grep .) || (echo "gofmt needed on the files above"; exit 1)
	$(GO) vet ./...

test:
	$(GO) test -count=1 -timeout 1200s ./...

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# Built, then exec'd rather than `go run`, so that Ctrl-C stops the lab
# cleanly (go run exits 1 when interrupted). LAB_FLAGS passes flags, e.g.
# make run LAB_FLAGS="--burst 300".
run:
	$(GO) build -o bin/intd ./cmd/intd
	exec bin/intd lab $(LAB_FLAGS)

# iperf3 TCP throughput h1 -> h2 through three intd soft switches on AF_PACKET
# (INT on, INT off) and through Linux forwarding in the same namespaces. Root.
.PHONY: bench-e2e
bench-e2e:
	INTD_BENCH_E2E=1 $(GO) test -count=1 -run '^TestBenchE2E$$' -v ./tests/

# intd build, test and code generation.
GO        ?= go
YANG      := yang/intd-int.yang yang/intd-int-metadata-semantics.yang
GEN_FLAGS := -path=yang,yang/ietf -output_file=gen/intd.go -package_name=gen \
	-generate_fakeroot -fakeroot_name=device -compress_paths=false \
	-typedef_enum_with_defmod -generate_append -generate_getters \
	-generate_delete -generate_leaf_getters -generate_populate_defaults \
	-generate_simple_unions -include_model_data -generate_rename

.PHONY: all generate build test lint complexity bench run check-generated release package image binaries

# Release builds: static binaries with the version stamped (see
# cmd/internal/buildinfo), into $(DIST). ARCH is the Debian/Go architecture
# of `make binaries`, `make package` and `make image`; `make release` builds
# every one of RELEASE_ARCHES.
DIST           ?= dist
ARCH           ?= $(shell $(GO) env GOARCH)
RELEASE_ARCHES := amd64 arm64
VERSION        ?= $(shell sh deploy/version.sh)
COMMIT         ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE           ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
# Debian versions sort "~" before and "+" after: a tag's pre-release
# (v1.2.0-rc1) and the pseudo-version of an untagged commit come before
# the release, commits after a tag (git describe's -N-gHASH) after it.
DEB_VERSION    ?= $(shell echo '$(VERSION)' | sed -E 's/^v//; s/-dirty$$/+dirty/; s/-([0-9]+)-g([0-9a-f]+)/+\1.g\2/; s/^([0-9.]+)-/\1~/; s/-/./g')
DEB_MAINTAINER ?= intd project <intd@intd-project.invalid>
BUILDINFO      := github.com/intd-project/intd/cmd/internal/buildinfo
LDFLAGS        := -s -w -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).date=$(DATE)

all: build

# Paths are left uncompressed so that every container of the model (config
# and state alike) can be addressed by gNMI Get and Set.
generate:
	$(GO) tool generator $(GEN_FLAGS) $(YANG)
	# Keep the module cache location out of the generated header.
	sed -i "s#$$($(GO) env GOMODCACHE)/##g" gen/intd.go
	gofmt -w gen/intd.go
	sh gen/versions.sh $(YANG) yang/ietf/ietf-inet-types.yang yang/ietf/ietf-yang-types.yang > gen/versions.go
	gofmt -w gen/versions.go
	mkdir -p gen/collector
	$(GO) tool generator -path=yang,yang/ietf -output_file=gen/collector/collector.go -package_name=collector \
		-generate_fakeroot -fakeroot_name=device -compress_paths=false \
		-typedef_enum_with_defmod -generate_append -generate_getters \
		-generate_delete -generate_leaf_getters -generate_populate_defaults \
		-generate_simple_unions -include_model_data -generate_rename yang/intd-collector.yang
	sed -i "s#$$($(GO) env GOMODCACHE)/##g" gen/collector/collector.go
	gofmt -w gen/collector/collector.go
	PACKAGE=collector sh gen/versions.sh yang/intd-collector.yang yang/ietf/ietf-yang-types.yang > gen/collector/versions.go
	gofmt -w gen/collector/versions.go
	# BPF objects of the tc/eBPF dataplane (bpf2go; needs clang and llvm-strip)
	# and bench-ebpf's test programs.
	$(GO) generate ./dataplane/ebpf ./tests

# Fails when `make generate` would change what is committed.
check-generated: generate
	git diff --exit-code -- gen/ dataplane/ebpf tests/testdata

build:
	$(GO) build ./...

lint:
	yanglint -p yang -p yang/ietf $(YANG)
	yanglint -p yang -p yang/ietf -t config $(YANG) yang/examples/*.json
	yanglint -p yang -p yang/ietf yang/intd-collector.yang
	yanglint -p yang -p yang/ietf yang/sonic-dtel.yang
	gofmt -l . | grep -v '^gen/' | (! grep .) || (echo "gofmt needed on the files above"; exit 1)
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) mod tidy -diff
	$(MAKE) --no-print-directory complexity

# Fails on any function above cyclomatic complexity 40, generated code
# and tests aside.
complexity:
	$(GO) tool gocyclo -over 40 -ignore '_test\.go$$|^gen/|^tests/' .

# One package at a time: the end-to-end tests (namespaces, iperf3, a NATS
# cluster losing a server) measure timing and must not share the CPUs.
test:
	$(GO) test -p 1 -count=1 -timeout 1200s ./...

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# Built, then exec'd rather than `go run`, so that Ctrl-C stops the lab
# cleanly (go run exits 1 when interrupted). LAB_FLAGS passes flags, e.g.
# make run LAB_FLAGS="--burst 300".
run:
	$(GO) build -o bin/intd ./cmd/intd
	exec bin/intd lab $(LAB_FLAGS)

# Interleaved ratios (median (min-max) over rounds, with the load
# average), root and iperf3: bench-soft compares iperf3 TCP h1 -> h2
# across three switches by Linux forwarding, a minimal AF_PACKET
# forwarder with vnet headers and intd's soft switch (INT off, on);
# bench-ebpf the tc/eBPF dataplane (no programs, programs with an empty
# watchlist, INT-XD, INT-MD sampled, INT-MD on every packet, its bound:
# the kernel segmenting at the source, INT-MD in a VXLAN-GPE session
# tunnel, and the same encapsulation by test programs).
# BENCH_ROUNDS and BENCH_SECS set the rounds and seconds per run.
BENCH_ROUNDS ?= 5
BENCH_SECS   ?= 4
.PHONY: bench-soft bench-ebpf
bench-soft bench-ebpf:
	INTD_BENCH=1 INTD_BENCH_ROUNDS=$(BENCH_ROUNDS) INTD_BENCH_SECS=$(BENCH_SECS) $(GO) test -count=1 -timeout 1800s \
		-run '^TestBench$(if $(filter bench-soft,$@),Soft,EBPF)$$' -v ./tests/

# The collector of BASE (a git revision) and of the work tree side by
# side: decode + aggregate CPU per report and the receive path against a
# null receiver, ROUNDS interleaved rounds, median (min-max), load average.
BASE ?= main
ROUNDS ?= 5
.PHONY: bench-collector
bench-collector:
	BASE=$(BASE) ROUNDS=$(ROUNDS) sh contrib/bench/collector-compare.sh

# Static (no cgo) linux binaries of intd and intcollector for $(ARCH) in
# $(DIST)/linux_$(ARCH)/.
binaries:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
		-o $(DIST)/linux_$(ARCH)/ ./cmd/intd ./cmd/intcollector

# The Debian package for $(ARCH), built with nfpm (a tool of go.mod).
package: binaries
	ARCH=$(ARCH) DEB_VERSION='$(DEB_VERSION)' DEB_MAINTAINER='$(DEB_MAINTAINER)' BIN=$(DIST)/linux_$(ARCH) \
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || date +%s) \
		$(GO) tool nfpm package --config deploy/package/nfpm.yaml --packager deb --target $(DIST)/

# The OCI image (an OCI layout in a tar) for $(ARCH): the static binaries on
# an empty base, nothing pulled. See docs/install.md.
image: binaries
	$(GO) run ./deploy/image -o $(DIST)/intd_image_linux_$(ARCH).tar -version '$(VERSION)' -revision '$(COMMIT)' -created '$(DATE)' \
		-platform linux/$(ARCH)=$(DIST)/linux_$(ARCH)

# Everything a release publishes, for every RELEASE_ARCHES: binaries, one
# tarball and one Debian package per architecture, one multi-architecture
# image, and SHA256SUMS over them.
release:
	rm -rf $(DIST)
	set -e; for a in $(RELEASE_ARCHES); do \
		$(MAKE) --no-print-directory package ARCH=$$a DIST=$(DIST) VERSION='$(VERSION)'; \
		tar -C $(DIST)/linux_$$a -cf - --sort=name --owner=0 --group=0 --numeric-owner --mtime='$(DATE)' \
			intd intcollector -C $(CURDIR) LICENSE NOTICE | gzip -n > $(DIST)/intd_$(VERSION)_linux_$$a.tar.gz; \
	done
	$(GO) run ./deploy/image -o $(DIST)/intd_image_$(VERSION).tar -version '$(VERSION)' -revision '$(COMMIT)' -created '$(DATE)' \
		$(foreach a,$(RELEASE_ARCHES),-platform linux/$(a)=$(DIST)/linux_$(a))
	cd $(DIST) && sha256sum intd_*.tar.gz *.deb intd_image_*.tar linux_*/* > SHA256SUMS

# Steer: the README's two commands. Both do all set-up on a fresh Debian
# machine as root: install missing system packages and the Rust toolchain,
# build, then run. Each prerequisite that cannot be had stops the run with
# one line saying what is missing.

SHELL := /bin/bash
# Targets run in the order written (a failed check stops what follows it);
# cargo runs its own jobs in parallel.
.NOTPARALLEL:
# Where rustup puts cargo: a toolchain installed by this run is found by the
# recipes after it.
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
STEER := target/release/steer
# The oldest Rust that builds the workspace: rust-version in Cargo.toml.
RUST_VERSION := $(shell sed -n 's/^rust-version *= *"\(.*\)"/\1/p' Cargo.toml)

# What the build and the lab need: clang and libbpf headers build the XDP
# program; libelf/zlib/pkg-config build libbpf-sys; iperf3 is the demo's
# traffic (and, with curl and python3, the programs the toe data path's
# sockets shim is tested with); iproute2 names the lab's namespaces (`ip netns add`; devices,
# addresses, routes, qdiscs and offloads are set over netlink and ioctls); chromium renders the
# test matrix's report in its browser test; libdpdk-dev is the other side of
# the DPDK comparison harnesses (bench-dpdk); nginx-light, redis-server,
# redis-tools (redis-cli, redis-benchmark), wrk and memcached are the real
# servers and clients run on the toe data path (crates/toe/tests/real_servers.rs,
# `steer exp apps`).
APT_PACKAGES := clang llvm libelf-dev zlib1g-dev pkg-config libbpf-dev linux-libc-dev \
                iperf3 curl python3 iproute2 bpftool chromium libdpdk-dev \
                nginx-light redis-server redis-tools wrk memcached

# The public packet captures some tests and matrix cases replay
# (docs/traces.md); they are not in the repository. Looked for in
# $STEER_TRACES, else traces/ here, else ../shared/traces next to the
# repository: the first directory holding captures is checked by `make
# traces` and handed to the tests.
TRACE_DIRS := $(CURDIR)/traces $(abspath $(CURDIR)/../shared/traces)
STEER_TRACES ?= $(firstword $(foreach d,$(TRACE_DIRS),$(if $(wildcard $(d)/*.pcap),$(d))))
override STEER_TRACES := $(abspath $(STEER_TRACES))
export STEER_TRACES
TRACE_DIGESTS := bench/traces.sha256

# The tests' strict mode (crates/testkit): every missing prerequisite fails.
STRICT_TESTS := STEER_STRICT_TESTS=1

.PHONY: all deps toolchain check-root traces build demo test lint bench bench-dpdk bench-matrix bench-matrix-full fuzz clean

all: build

deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		[ "$$(id -u)" = 0 ] || { echo "missing system packages:$$missing: run make as root to install them"; exit 2; }; \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# cargo, rustfmt (the BPF skeletons are formatted at build time) and clippy,
# at least RUST_VERSION. Missing or older: installed with rustup (itself from
# Debian's rustup package where there is one, else rustup-init from
# static.rust-lang.org, which https://rustup.rs installs).
toolchain:
	@rust_ok() { \
		have=$$($(CARGO) --version 2>/dev/null | cut -d' ' -f2); \
		[ -n "$$have" ] && [ "$$(printf '%s\n' $(RUST_VERSION) $$have | sort -V | head -n1)" = "$(RUST_VERSION)" ] \
			&& $(CARGO) fmt --version >/dev/null 2>&1 && $(CARGO) clippy --version >/dev/null 2>&1; \
	}; \
	rust_ok && exit 0; \
	echo "Rust $${have:-not found}, need $(RUST_VERSION) or newer with rustfmt and clippy: installing it with rustup"; \
	if ! command -v rustup >/dev/null; then \
		[ "$$(id -u)" = 0 ] && apt-get update -qq; \
		if apt-cache policy rustup 2>/dev/null | grep -q 'Candidate: [0-9]'; then \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustup; \
		elif command -v curl >/dev/null; then \
			tmp=$$(mktemp -d) && curl --proto '=https' --tlsv1.2 -sSf -o $$tmp/rustup-init \
				https://static.rust-lang.org/rustup/dist/$$(uname -m)-unknown-linux-gnu/rustup-init \
				&& chmod +x $$tmp/rustup-init \
				&& $$tmp/rustup-init -y --no-modify-path --profile minimal --default-toolchain none; \
			rm -rf $$tmp; \
		fi; \
	fi; \
	if command -v rustup >/dev/null; then \
		rustup toolchain install stable --profile minimal \
			&& rustup default stable && rustup component add rustfmt clippy; \
	fi; \
	rust_ok || { echo "Rust $(RUST_VERSION) or newer (cargo, rustfmt, clippy) is needed, found $${have:-none}: install it with rustup (https://rustup.rs)"; exit 2; }

# The lab (namespaces, veths, XDP, cgroup BPF) and the root-only tests.
check-root:
	@[ "$$(id -u)" = 0 ] || { echo "make $(or $(MAKECMDGOALS),test) needs root: its tests and matrix build network namespaces, veths, XDP and cgroup BPF programs; run it as root"; exit 2; }

# Every capture of TRACE_DIGESTS, with its published SHA-256.
traces:
	@dir="$(STEER_TRACES)"; \
	[ -n "$$dir" ] || { echo "the packet captures are missing: put the files of docs/traces.md (where to get them) in traces/, or set STEER_TRACES to their directory"; exit 2; }; \
	while read -r sum name; do \
		[ -f "$$dir/$$name" ] || { echo "the packet capture $$dir/$$name is missing: docs/traces.md says where to get it"; exit 2; }; \
		[ "$$(sha256sum < "$$dir/$$name" | cut -d' ' -f1)" = "$$sum" ] \
			|| { echo "$$dir/$$name is not the published capture: its SHA-256 differs from $(TRACE_DIGESTS) (docs/traces.md)"; exit 2; }; \
	done < $(TRACE_DIGESTS)

build: deps toolchain
	$(CARGO) build --release --workspace --bins

demo: build
	$(STEER) demo

lint: deps toolchain
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings

# Every test, the root-only ones (#[ignore = "needs root ..."]) included, in
# the tests' strict mode (each test binary with root-only tests fails a
# strict run that leaves them out: testkit::strict_mode_guard!); then the
# test matrix. The tests include building the fuzz targets on stable and
# running each once on its seeds (crates/steer/tests/fuzz_seeds.rs).
# Root and the captures are checked before anything is built. Every test
# binary runs even after one fails (--no-fail-fast), so a run names every
# failure at once.
test: check-root traces build lint
	$(STRICT_TESTS) $(CARGO) test --workspace --release --no-fail-fast -- --include-ignored
	$(MAKE) bench-matrix

# The quick subset of the test matrix (docs/bench.md): run it, write the
# report, render it in headless Chromium (screenshot under target/), then fail
# on a state regression against bench/matrix/baseline.json (never on noisy
# numbers). The history in target/bench-ci/ accumulates over runs. Every case
# that fits `make test`'s 30 minutes runs here; bench-matrix-full runs all
# (the criterion and DPDK cases build their benchmarks: minutes each).
BENCH_CI_DB := target/bench-ci/bench.sqlite
BENCH_CI_FILTER := demo/flows=1/*,demo/flows=10/*,demo/flows=16/*,xdp-overhead/*,lb-sim/*,lb-sim-order/*,srpic/*,lb-live,toe*,ooo,loss,binder-connect,apps
bench-matrix: check-root traces build
	mkdir -p target/bench-ci
	$(STEER) bench run --quick --filter '$(BENCH_CI_FILTER)' --db $(BENCH_CI_DB)
	$(STEER) bench report -o target/bench-ci/report --db $(BENCH_CI_DB)
	$(STRICT_TESTS) STEER_BENCH_REPORT=$(CURDIR)/target/bench-ci/report/index.html STEER_BENCH_DB=$(CURDIR)/$(BENCH_CI_DB) \
		$(CARGO) test --release -p bench --test report_browser -- --include-ignored --nocapture
	$(STEER) bench check --baseline bench/matrix/baseline.json --run last --db $(BENCH_CI_DB)

# Every case of the matrix, quick, checked against the same baseline.
BENCH_FULL_DB := target/bench-full/bench.sqlite
bench-matrix-full: check-root traces build
	mkdir -p target/bench-full
	$(STEER) bench run --quick --db $(BENCH_FULL_DB)
	$(STEER) bench report -o target/bench-full/report --db $(BENCH_FULL_DB)
	$(STEER) bench check --baseline bench/matrix/baseline.json --run last --db $(BENCH_FULL_DB)

bench: build
	$(CARGO) bench -p rss --bench toeplitz

# Steer beside DPDK 22.11, one C harness each, every ratio from one run
# (docs/performance.md): Toeplitz (rss vs rte_thash / rte_softrss; runs on
# any x86-64 CPU and names what it skips) and reorder repair (the SRPIC
# sorter vs rte_reorder, 1, 16 and 256 flows). MARCH (default native) is
# passed to both.
bench-dpdk: deps toolchain
	$(MAKE) -C bench/dpdk run
	$(MAKE) -C bench/dpdk-reorder run

# Each fuzz target for FUZZ_SECONDS, seeded from fuzz/seeds (`make test`
# only builds them on stable and runs each seed once). cargo-fuzz
# builds with sanitizer flags only a nightly toolchain accepts
# (https://rust-fuzz.github.io/book/cargo-fuzz/setup.html): rustup installs
# one next to the stable toolchain.
FUZZ_SECONDS ?= 60
fuzz: deps toolchain
	@command -v rustup >/dev/null || { echo "make fuzz needs rustup, for the nightly toolchain cargo-fuzz builds with: https://rustup.rs"; exit 2; }
	rustup toolchain install nightly --profile minimal
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz
	cd fuzz && for t in $$(rustup run nightly cargo fuzz list); do \
		mkdir -p corpus/$$t; cp -n seeds/$$t/* corpus/$$t/ 2>/dev/null || true; \
		rustup run nightly cargo fuzz run $$t corpus/$$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

clean:
	$(CARGO) clean

# Steer: the README's two commands. Both do all set-up on a fresh Debian
# machine as root: install missing system packages, build, then run.

SHELL := /bin/bash
CARGO ?= cargo
STEER := target/release/steer

# What the build and the lab need: clang and libbpf headers build the XDP
# program; libelf/zlib/pkg-config build libbpf-sys; iperf3 is the demo's
# traffic; iproute2 and ethtool set up the namespace lab; chromium renders the
# test matrix's report in its browser test.
APT_PACKAGES := clang llvm libelf-dev zlib1g-dev pkg-config libbpf-dev linux-libc-dev \
                iperf3 iproute2 ethtool bpftool chromium

.PHONY: all deps build demo test lint bench bench-matrix fuzz clean

all: build

deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 2; }

build: deps
	$(CARGO) build --release --workspace --bins

demo: build
	$(STEER) demo

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings

# Tests that need root (namespaces, veths, XDP, cgroup BPF) are marked
# #[ignore = "needs root ..."]: as root they run (--include-ignored); otherwise
# cargo reports them as ignored, with that reason, never as passed.
test: build lint
	@if [ "$$(id -u)" = 0 ]; then \
		$(CARGO) test --workspace --release -- --include-ignored; \
	else \
		echo "not root: tests marked 'needs root' are reported as ignored"; \
		$(CARGO) test --workspace --release; \
	fi
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) bench-matrix; \
	else echo "not root: the test matrix (make bench-matrix) is skipped: its cases need the lab"; fi

# The quick subset of the test matrix (docs/bench.md): run it, write the
# report, render it in headless Chromium (screenshot under target/), then fail
# on a state regression against bench/matrix/baseline.json (never on noisy
# numbers). The history in target/bench-ci/ accumulates over runs.
BENCH_CI_DB := target/bench-ci/bench.sqlite
BENCH_CI_FILTER := demo/flows=16/*,xdp-overhead/streams=4,lb-sim/policy=crossrss/*,srpic/*,lb-live
# The shared public captures the trace cases replay (not in the repository).
STEER_TRACES ?= $(firstword $(wildcard $(CURDIR)/traces $(CURDIR)/../shared/traces /work/shared/traces))
export STEER_TRACES
bench-matrix: build
	mkdir -p target/bench-ci
	$(STEER) bench run --quick --filter '$(BENCH_CI_FILTER)' --db $(BENCH_CI_DB)
	$(STEER) bench report -o target/bench-ci/report --db $(BENCH_CI_DB)
	STEER_BENCH_REPORT=$(CURDIR)/target/bench-ci/report/index.html STEER_BENCH_DB=$(CURDIR)/$(BENCH_CI_DB) \
		$(CARGO) test --release -p bench --test report_browser -- --nocapture
	$(STEER) bench check --baseline bench/matrix/baseline.json --run last --db $(BENCH_CI_DB)

bench: build
	$(CARGO) bench -p rss --bench toeplitz

# Each fuzz target for FUZZ_SECONDS, seeded from fuzz/seeds. cargo-fuzz needs
# nightly features; the stable toolchain provides them with RUSTC_BOOTSTRAP=1
# (this machine's nightly toolchain has no rustc component).
FUZZ_SECONDS ?= 60
fuzz: deps
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz
	cd fuzz && for t in $$($(CARGO) fuzz list); do \
		mkdir -p corpus/$$t; cp -n seeds/$$t/* corpus/$$t/ 2>/dev/null || true; \
		RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run $$t corpus/$$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

clean:
	$(CARGO) clean

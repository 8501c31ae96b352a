# What the DPDK comparison harnesses (bench/dpdk, bench/dpdk-reorder) share:
# the compiler flags, Steer's C ABI crate built for the same target, and the
# bench binary linked against both. A harness sets STEER_LIB_NAME,
# BENCH_NAME, BENCH_SRC, BENCH_HDR, RUST_SRC and RUN_ARGS, then includes
# this file.
#
# MARCH is the target of both sides: `-march=$(MARCH)` for the C and
# `-C target-cpu=$(MARCH)` for the Rust. DPDK's pkg-config cflags carry
# -march=corei7; -march=$(MARCH) must come AFTER them, or code that needs
# the target's extensions (rte_thash_gfni: __GFNI__ and __AVX512F__) is
# compiled out.

CC      ?= cc
CARGO   ?= cargo
MARCH   ?= native
DPDK_CFLAGS := $(shell pkg-config --cflags libdpdk)
DPDK_LIBS   := $(shell pkg-config --libs libdpdk)
CFLAGS  := -O3 -g -Wall -Wextra $(DPDK_CFLAGS) -march=$(MARCH) -DALLOW_EXPERIMENTAL_API
BUILD   := build/$(MARCH)
STEER_TARGET := steer-capi/target/$(MARCH)
STEER_LIB := $(STEER_TARGET)/release/$(STEER_LIB_NAME)
BENCH   := $(BUILD)/$(BENCH_NAME)

.PHONY: all run clean
all: $(BENCH)

$(STEER_LIB): steer-capi/Cargo.toml $(RUST_SRC)
	RUSTFLAGS="-C target-cpu=$(MARCH)" $(CARGO) build --release \
		--manifest-path steer-capi/Cargo.toml --target-dir $(STEER_TARGET)

$(BENCH): $(BENCH_SRC) $(BENCH_HDR) ../harness_json.h $(STEER_LIB)
	mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -o $@ $(BENCH_SRC) $(STEER_LIB) $(DPDK_LIBS) -lpthread -ldl -lm

run: $(BENCH)
	./$(BENCH) $(RUN_ARGS)

clean:
	rm -rf build steer-capi/target

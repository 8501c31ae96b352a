//! Builds the two binders' kernel-facing parts into OUT_DIR:
//!
//! - `libsteer_preload.so` from `shim/steer_preload.c` (through
//!   `buildkit::PreloadShim`), embedded in the crate with `include_bytes!`
//!   (see `src/preload.rs`), with the allocator's lease table layout
//!   (`srap/src/alloc/lease_table.h`);
//! - the cgroup connect4/connect6 program `src/bpf/connect.bpf.c` and its
//!   Rust skeleton `connect.skel.rs` (never committed), and the constants of
//!   `src/bpf/binder.h` (`binder_h.rs`), through buildkit.

const SHIM: &str = "shim/steer_preload.c";
/// The allocator's lease table layout, shared by the shim and srap.
const LEASE_TABLE_DIR: &str = "../srap/src/alloc";
const LEASE_TABLE: &str = "../srap/src/alloc/lease_table.h";
const BPF: &str = "src/bpf/connect.bpf.c";
const BPF_HEADER: &str = "src/bpf/binder.h";

fn main() {
    buildkit::PreloadShim {
        source: SHIM,
        include_dirs: &[LEASE_TABLE_DIR],
        exports_marked: false,
    }
    .build("libsteer_preload.so");

    buildkit::BpfProgram {
        source: BPF,
        headers: &[BPF_HEADER],
        include_dirs: &[],
        // -mcpu=v3: atomic fetch-and-add for the slot counter.
        clang_args: &["-mcpu=v3"],
    }
    .build("connect.skel.rs");
    buildkit::header_constants(BPF_HEADER, "binder_h.rs");
    // The shim's constants shared with Rust (pinned in src/preload.rs).
    buildkit::header_constants(SHIM, "steer_preload_defs.rs");
    // The lease table's constants, pinned against srap's in src/preload.rs.
    buildkit::header_constants(LEASE_TABLE, "lease_table_defs.rs");
}

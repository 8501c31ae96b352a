//! Builds the two binders' kernel-facing parts into OUT_DIR:
//!
//! - `libsteer_preload.so` from `shim/steer_preload.c` (the `cc` crate picks
//!   the compiler and flags; it is linked as a shared object here), embedded
//!   in the crate with `include_bytes!` (see `src/preload.rs`), with the
//!   allocator's lease table layout (`srap/src/alloc/lease_table.h`);
//! - the cgroup connect4/connect6 program `src/bpf/connect.bpf.c` and its
//!   Rust skeleton `connect.skel.rs` (never committed), and the constants of
//!   `src/bpf/binder.h` (`binder_h.rs`), through buildkit.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const SHIM: &str = "shim/steer_preload.c";
/// The allocator's lease table layout, shared by the shim and srap.
const LEASE_TABLE_DIR: &str = "../srap/src/alloc";
const LEASE_TABLE: &str = "../srap/src/alloc/lease_table.h";
const BPF: &str = "src/bpf/connect.bpf.c";
const BPF_HEADER: &str = "src/bpf/binder.h";

fn build_shim(out: &std::path::Path) {
    let compiler = cc::Build::new()
        .opt_level(2)
        .pic(true)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .get_compiler();
    let so = out.join("libsteer_preload.so");
    let mut cmd: Command = compiler.to_command();
    cmd.args([
        "-shared",
        "-fPIC",
        "-fvisibility=default",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-I",
        LEASE_TABLE_DIR,
        "-o",
    ])
    .arg(&so)
    .arg(SHIM)
    .args(["-ldl", "-lpthread"]);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running the C compiler for {SHIM}: {e}"));
    assert!(status.success(), "compiling {SHIM} failed: {cmd:?}");
}

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    build_shim(&out);

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
    println!("cargo:rerun-if-changed={SHIM}");
    // The lease table's constants, pinned against srap's in src/preload.rs.
    buildkit::header_constants(LEASE_TABLE, "lease_table_defs.rs");
}

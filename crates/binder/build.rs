//! Builds the two binders' kernel-facing parts into OUT_DIR:
//!
//! - `libsteer_preload.so` from `shim/steer_preload.c` (the `cc` crate picks
//!   the compiler and flags; it is linked as a shared object here), embedded
//!   in the crate with `include_bytes!` (see `src/preload.rs`);
//! - the cgroup connect4/connect6 program `src/bpf/connect.bpf.c` and its
//!   Rust skeleton `connect.skel.rs` (never committed).

use std::env;
use std::path::PathBuf;
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

const SHIM: &str = "shim/steer_preload.c";
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

    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    // The uapi headers include <asm/types.h>, which Debian keeps under the
    // multiarch directory.
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    SkeletonBuilder::new()
        .source(BPF)
        // -mcpu=v3: atomic fetch-and-add for the slot counter.
        .clang_args([multiarch.as_str(), "-O2", "-mcpu=v3", "-Wall", "-Werror"])
        .build_and_generate(out.join("connect.skel.rs"))
        .expect("building connect.bpf.c (needs clang and libbpf-dev headers)");

    println!("cargo:rerun-if-changed={SHIM}");
    println!("cargo:rerun-if-changed={BPF}");
    println!("cargo:rerun-if-changed={BPF_HEADER}");
}

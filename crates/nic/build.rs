//! Compiles the XDP program with clang and generates its Rust skeleton into
//! OUT_DIR (`softrss.skel.rs`, never committed).

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/softrss.bpf.c";
const HEADER: &str = "src/bpf/softrss.h";
/// Directory of steer_flow.h, the parser and Toeplitz hash shared by the
/// software RSS (crate nic) and the load balancer (crate lbxdp), relative to
/// this crate.
const FLOW_DIR: &str = "src/bpf";

fn main() {
    let out =
        PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("softrss.skel.rs");
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    // The uapi headers (<linux/if_ether.h>, ...) include <asm/types.h>, which
    // Debian keeps under the multiarch directory.
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    let manifest =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let flow_dir = format!("-I{}", manifest.join(FLOW_DIR).display());
    SkeletonBuilder::new()
        .source(SRC)
        .clang_args([
            multiarch.as_str(),
            flow_dir.as_str(),
            "-O2",
            "-Wall",
            "-Werror",
        ])
        .build_and_generate(&out)
        .expect("building softrss.bpf.c (needs clang and libbpf-dev headers)");
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed={HEADER}");
    println!("cargo:rerun-if-changed={FLOW_DIR}/steer_flow.h");
}

//! Compiles the XDP load balancer with clang and generates its Rust skeleton
//! into OUT_DIR (`lbxdp.skel.rs`, never committed), and the constants of
//! `lbxdp.h` (`lbxdp_h.rs`): the header is their one home.

fn main() {
    buildkit::BpfProgram {
        source: "src/bpf/lbxdp.bpf.c",
        // steer_flow.h, the parser and Toeplitz hash shared with the software
        // RSS, lives in nic, whose hash the backends compute and which this
        // crate already depends on.
        headers: &["src/bpf/lbxdp.h", "../nic/src/bpf/steer_flow.h"],
        include_dirs: &["../nic/src/bpf"],
        clang_args: &[],
    }
    .build("lbxdp.skel.rs");
    buildkit::header_constants("src/bpf/lbxdp.h", "lbxdp_h.rs");
}

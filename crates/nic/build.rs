//! Compiles the XDP program with clang and generates its Rust skeleton into
//! OUT_DIR (`softrss.skel.rs`, never committed), and the constants of
//! `softrss.h` (`softrss_h.rs`): the header is their one home.

fn main() {
    buildkit::BpfProgram {
        source: "src/bpf/softrss.bpf.c",
        // steer_flow.h: the parser and Toeplitz hash shared by the software
        // RSS and the load balancer (crate lbxdp).
        headers: &["src/bpf/softrss.h", "src/bpf/steer_flow.h"],
        include_dirs: &["src/bpf"],
        clang_args: &[],
    }
    .build("softrss.skel.rs");
    buildkit::header_constants("src/bpf/softrss.h", "softrss_h.rs");
}

//! Builds the AF_XDP backend's XDP program `src/bpf/xsk_redirect.bpf.c`
//! and its Rust skeleton `xsk_redirect.skel.rs` (never committed), and the
//! constants of `src/bpf/xsk.h` (`xsk_h.rs`), through buildkit.

const BPF: &str = "src/bpf/xsk_redirect.bpf.c";
const BPF_HEADER: &str = "src/bpf/xsk.h";

fn main() {
    buildkit::BpfProgram {
        source: BPF,
        headers: &[BPF_HEADER],
        include_dirs: &[],
        clang_args: &[],
    }
    .build("xsk_redirect.skel.rs");
    buildkit::header_constants(BPF_HEADER, "xsk_h.rs");
}

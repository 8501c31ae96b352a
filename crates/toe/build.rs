//! Builds the application interface's C parts into OUT_DIR:
//!
//! - `libsteer_toe.so` from `shim/toe_preload.c`, the LD_PRELOAD sockets
//!   shim (embedded with `include_bytes!`, see `src/app/shim.rs`);
//! - the constants of `shim/toe_app.h` (`toe_app_h.rs`), the one definition
//!   of the shared-memory layout, pinned in `src/app/layout.rs`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const SHIM: &str = "shim/toe_preload.c";
const HEADER: &str = "shim/toe_app.h";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let compiler = cc::Build::new().opt_level(2).pic(true).get_compiler();
    let so = out.join("libsteer_toe.so");
    let mut cmd: Command = compiler.to_command();
    cmd.args([
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-I",
        "shim",
        "-o",
    ])
    .arg(&so)
    .arg(SHIM)
    .args(["-ldl", "-lpthread"]);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running the C compiler for {SHIM}: {e}"));
    assert!(status.success(), "compiling {SHIM} failed: {cmd:?}");
    println!("cargo:rerun-if-changed={SHIM}");
    buildkit::header_constants(HEADER, "toe_app_h.rs");
}

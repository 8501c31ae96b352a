//! Builds the application interface's C parts into OUT_DIR:
//!
//! - `libsteer_toe.so` from `shim/toe_preload.c`, the LD_PRELOAD sockets
//!   shim (embedded with `include_bytes!`, see `src/app/shim.rs`);
//! - the constants of `shim/toe_app.h` (`toe_app_h.rs`), the one definition
//!   of the shared-memory layout, pinned in `src/app/layout.rs`.

const SHIM: &str = "shim/toe_preload.c";
const HEADER: &str = "shim/toe_app.h";

fn main() {
    buildkit::PreloadShim {
        source: SHIM,
        include_dirs: &["shim"],
        exports_marked: true,
    }
    .build("libsteer_toe.so");
    buildkit::header_constants(HEADER, "toe_app_h.rs");
}

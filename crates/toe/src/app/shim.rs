//! The LD_PRELOAD sockets shim (`shim/toe_preload.c`, built by build.rs):
//! its bytes, and how a program is started with it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::layout::SOCKET_ENV;

/// The compiled shim (a shared object).
pub const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libsteer_toe.so"));
pub const SHIM_NAME: &str = "libsteer_toe.so";

/// Writes the shim where shims go (`host::preload::install`) unless an
/// identical file is there, and returns its path.
pub fn install() -> std::io::Result<PathBuf> {
    host::preload::install(SHIM, SHIM_NAME)
}

/// Makes `cmd` run on the data path served at `socket`: LD_PRELOAD the
/// shim (before what the environment preloads already) and name the
/// socket.
pub fn configure(cmd: &mut Command, shim: &Path, socket: &Path) {
    host::preload::preload_with_socket(cmd, shim, SOCKET_ENV, Some(socket));
}

#[cfg(test)]
mod tests {
    #[test]
    fn shim_is_an_elf_shared_object() {
        assert!(host::preload::is_shared_object(super::SHIM));
    }
}

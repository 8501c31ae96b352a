//! The LD_PRELOAD binder: the shim's bytes (built from `shim/steer_preload.c`
//! by build.rs and embedded here), installing them as a file, and the
//! environment a command needs to run with it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::BinderError;

/// The compiled shim (a shared object).
pub const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libsteer_preload.so"));
/// The `#define`s of the shim (`shim/steer_preload.c`), generated from it by
/// build.rs (all of them; Rust uses those it shares).
#[allow(dead_code)]
mod shim_defs {
    include!(concat!(env!("OUT_DIR"), "/steer_preload_defs.rs"));
}

/// The `#define`s of the allocator's lease table layout
/// (`srap/src/alloc/lease_table.h`, compiled into the shim).
#[allow(dead_code)]
mod lease_table_defs {
    include!(concat!(env!("OUT_DIR"), "/lease_table_defs.rs"));
}

/// Where the allocator listens unless [`SOCKET_ENV`] says otherwise.
pub use srap::alloc::{DEFAULT_SOCKET, SOCKET_ENV};
/// `STEER_PRELOAD_DEBUG=1` makes the shim log each decision to stderr.
pub const DEBUG_ENV: &str = shim_defs::DEBUG_ENV;
/// `STEER_PRELOAD_TABLE=0` stops the shim from claiming ports from the
/// allocator's lease table (every lease is then a round trip).
pub const TABLE_ENV: &str = shim_defs::TABLE_ENV;
/// `STEER_PRELOAD_BATCH=N`: the most ports the shim leases at once for
/// repeated connects to one destination (1 turns spares off; default 16).
pub const BATCH_ENV: &str = shim_defs::BATCH_ENV;

// The shim (C) and the allocator (srap) speak one protocol: what the shim
// hard-codes must be what the allocator serves, checked at compile time.
const _: () = {
    assert!(str_eq(shim_defs::DEFAULT_SOCK, srap::alloc::DEFAULT_SOCKET));
    assert!(str_eq(shim_defs::SOCKET_ENV, srap::alloc::SOCKET_ENV));
    assert!(shim_defs::MAX_BATCH as usize == srap::alloc::MAX_BATCH);
    assert!(shim_defs::ALLOC_TIMEOUT_MS as u128 == srap::alloc::client::CLIENT_TIMEOUT.as_millis());
};

// The lease table: the layout the shim was compiled with is the one the
// allocator writes (srap mirrors the header in Rust and checks its structs'
// sizes and offsets against these numbers itself).
const _: () = {
    use lease_table_defs as c;
    use srap::alloc::table as rs;
    assert!(str_eq(c::LT_SUFFIX, rs::LT_SUFFIX));
    assert!(c::LT_MAGIC == rs::LT_MAGIC);
    assert!(c::LT_VERSION == rs::LT_VERSION);
    assert!(c::LT_REGIONS as usize == rs::LT_REGIONS);
    assert!(c::LT_SLOTS as usize == rs::LT_SLOTS);
    assert!(c::LT_STALE_MS as u64 == rs::LT_STALE_MS);
    assert!(c::LT_HEARTBEAT_MS as u64 == rs::LT_HEARTBEAT_MS);
    assert!(c::LT_WAKE_SLOT as usize == rs::LT_WAKE_SLOT);
    assert!(c::LT_STATE_EMPTY as u64 == rs::LT_STATE_EMPTY);
    assert!(c::LT_STATE_FREE as u64 == rs::LT_STATE_FREE);
    assert!(c::LT_STATE_CLAIMED as u64 == rs::LT_STATE_CLAIMED);
    assert!(c::LT_PORT_SHIFT == rs::LT_PORT_SHIFT);
    assert!(c::LT_GEN_SHIFT == rs::LT_GEN_SHIFT);
    assert!(c::LT_FAMILY_V4 as u8 == rs::LT_FAMILY_V4);
    assert!(c::LT_FAMILY_V6 as u8 == rs::LT_FAMILY_V6);
    assert!(c::LT_PROTO_TCP as u8 == rs::LT_PROTO_TCP);
    assert!(c::LT_HEADER_SIZE as usize == rs::LT_HEADER_SIZE);
    assert!(c::LT_REGION_KEY_SIZE as usize == rs::LT_REGION_KEY_SIZE);
    assert!(c::LT_SLOT_SIZE as usize == rs::LT_SLOT_SIZE);
    assert!(c::LT_REGION_SIZE as usize == rs::LT_REGION_SIZE);
    assert!(c::LT_FILE_SIZE as usize == rs::LT_FILE_SIZE);
    assert!(c::LT_OFF_HEARTBEAT as usize == std::mem::offset_of!(rs::LtHeader, heartbeat_ms));
    assert!(c::LT_OFF_CLAIMS as usize == std::mem::offset_of!(rs::LtHeader, claims));
    assert!(c::LT_OFF_KEY_LOCAL as usize == std::mem::offset_of!(rs::LtRegionKey, local));
    assert!(c::LT_OFF_KEY_REMOTE as usize == std::mem::offset_of!(rs::LtRegionKey, remote));
};

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
/// The shim's file name.
pub const SHIM_NAME: &str = "libsteer_preload.so";
/// Writes the shim to `/run/steer/libsteer_preload.so` (or, when that is
/// not writable, to a private per-user directory under the temp dir) unless
/// an identical file is there, and returns its path (`host::preload`).
pub fn install_shim() -> Result<PathBuf, BinderError> {
    host::preload::install(SHIM, SHIM_NAME)
        .map_err(|e| BinderError::io(format!("install {SHIM_NAME}"), e))
}

/// Writes the shim into `dir` (see `host::preload::install_in`).
pub fn install_shim_in(dir: &Path) -> Result<PathBuf, BinderError> {
    host::preload::install_in(dir, SHIM, SHIM_NAME)
        .map_err(|e| BinderError::io(format!("install {SHIM_NAME} in {}", dir.display()), e))
}

/// Sets LD_PRELOAD (keeping what the environment preloads already) and,
/// when given, the allocator socket.
pub fn configure(cmd: &mut Command, shim: &Path, socket: Option<&Path>) {
    host::preload::preload_with_socket(cmd, shim, SOCKET_ENV, socket);
}

#[cfg(test)]
mod tests {
    #[test]
    fn shim_is_an_elf_shared_object() {
        assert!(host::preload::is_shared_object(super::SHIM));
    }
}

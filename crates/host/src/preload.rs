//! Installing an LD_PRELOAD shim that a crate embeds (its compiled bytes)
//! and starting programs with it: the shims of the port binder and of the
//! userspace TCP data path are put in place and preloaded the same way.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where shims go when this directory is writable (root).
pub const INSTALL_DIR: &str = "/run/steer";

/// Writes `bytes` as `name` under [`INSTALL_DIR`], or, when that is not
/// writable, in a private per-user directory under the temp dir, unless an
/// identical file is there; returns its path.
pub fn install(bytes: &[u8], name: &str) -> std::io::Result<PathBuf> {
    match install_in(Path::new(INSTALL_DIR), bytes, name) {
        Ok(path) => Ok(path),
        Err(_) => install_in(&private_dir()?, bytes, name),
    }
}

/// Writes `bytes` as `dir/name` unless an identical file is there: a temp
/// file of its own renamed over the old one, so running programs keep the
/// file they mapped and threads installing at once do not collide.
pub fn install_in(dir: &Path, bytes: &[u8], name: &str) -> std::io::Result<PathBuf> {
    let path = dir.join(name);
    if std::fs::read(&path).is_ok_and(|b| b == bytes) {
        return Ok(path);
    }
    std::fs::create_dir_all(dir)?;
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{n}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o755))?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    Ok(path)
}

/// `{temp}/steer-{uid}`, made 0700 if new; an existing one must be this
/// user's and not writable by others (it holds code other programs load).
fn private_dir() -> std::io::Result<PathBuf> {
    let uid = nix::unistd::getuid().as_raw();
    let dir = std::env::temp_dir().join(format!("steer-{uid}"));
    match std::fs::create_dir(&dir) {
        Ok(()) => std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = std::fs::metadata(&dir)?;
            if meta.uid() != uid || meta.mode() & 0o022 != 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("{} is not a private directory of uid {uid}", dir.display()),
                ));
            }
        }
        Err(e) => return Err(e),
    }
    Ok(dir)
}

/// The value of LD_PRELOAD with `shim` first and `existing` kept after it.
pub fn ld_preload_value(shim: &Path, existing: Option<&str>) -> String {
    match existing.map(str::trim).filter(|s| !s.is_empty()) {
        Some(rest) => format!("{} {rest}", shim.display()),
        None => shim.display().to_string(),
    }
}

/// Makes `cmd` preload `shim`, before what this environment preloads.
pub fn preload(cmd: &mut Command, shim: &Path) {
    let existing = std::env::var("LD_PRELOAD").ok();
    cmd.env("LD_PRELOAD", ld_preload_value(shim, existing.as_deref()));
}

/// Makes `cmd` preload `shim` (see [`preload`]) and, when given, tells
/// the shim in `socket_env` the socket of the service it talks to.
pub fn preload_with_socket(
    cmd: &mut Command,
    shim: &Path,
    socket_env: &str,
    socket: Option<&Path>,
) {
    preload(cmd, shim);
    if let Some(socket) = socket {
        cmd.env(socket_env, socket);
    }
}

/// Whether `bytes` are an ELF shared object (the magic, then e_type
/// ET_DYN): what an embedded shim must be for the dynamic loader.
pub fn is_shared_object(bytes: &[u8]) -> bool {
    bytes.len() > 17 && bytes[..4] == *b"\x7fELF" && u16::from_le_bytes([bytes[16], bytes[17]]) == 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_object_is_told_from_other_bytes() {
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[16] = 3;
        assert!(is_shared_object(&elf));
        elf[16] = 2; // ET_EXEC
        assert!(!is_shared_object(&elf));
        assert!(!is_shared_object(b"\x7fELF"));
        assert!(!is_shared_object(b"#!/bin/sh\nexit 0\n"));
    }

    #[test]
    fn preload_keeps_existing_libraries() {
        let shim = Path::new("/run/steer/libsteer_preload.so");
        assert_eq!(
            ld_preload_value(shim, None),
            "/run/steer/libsteer_preload.so"
        );
        assert_eq!(
            ld_preload_value(shim, Some("  ")),
            "/run/steer/libsteer_preload.so"
        );
        assert_eq!(
            ld_preload_value(shim, Some("libfoo.so")),
            "/run/steer/libsteer_preload.so libfoo.so"
        );
    }

    #[test]
    fn an_identical_file_is_kept_and_a_changed_one_replaced() {
        let dir = testkit::TempDir::new("host-preload");
        let first = install_in(dir.path(), b"one", "lib.so").unwrap();
        let inode = std::fs::metadata(&first).unwrap().ino();
        let again = install_in(dir.path(), b"one", "lib.so").unwrap();
        assert_eq!(std::fs::metadata(&again).unwrap().ino(), inode);
        install_in(dir.path(), b"two", "lib.so").unwrap();
        assert_eq!(std::fs::read(&first).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&first).unwrap().mode() & 0o777, 0o755);
    }
}

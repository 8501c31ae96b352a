//! The LD_PRELOAD sockets shim (`shim/toe_preload.c`, built by build.rs):
//! its bytes, and how a program is started with it.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::layout::SOCKET_ENV;

/// The compiled shim (a shared object).
pub const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libsteer_toe.so"));
pub const SHIM_NAME: &str = "libsteer_toe.so";

/// Writes the shim into a private per-user directory under the temp dir
/// (unless an identical file is there) and returns its path.
pub fn install() -> std::io::Result<PathBuf> {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::temp_dir().join(format!("steer-toe-{uid}"));
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
    install_in(&dir)
}

/// Writes the shim into `dir` (a temp file renamed over the old one, so
/// running programs keep the file they mapped).
pub fn install_in(dir: &Path) -> std::io::Result<PathBuf> {
    let path = dir.join(SHIM_NAME);
    if std::fs::read(&path).is_ok_and(|b| b == SHIM) {
        return Ok(path);
    }
    // A name of its own per call: threads of one process may install at once.
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{SHIM_NAME}.{}.{n}", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(SHIM)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o755))?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Makes `cmd` run on the data path served at `socket`: LD_PRELOAD the
/// shim (before what the environment preloads already) and name the
/// socket.
pub fn configure(cmd: &mut Command, shim: &Path, socket: &Path) {
    let preload = match std::env::var("LD_PRELOAD")
        .ok()
        .filter(|s| !s.trim().is_empty())
    {
        Some(rest) => format!("{} {rest}", shim.display()),
        None => shim.display().to_string(),
    };
    cmd.env("LD_PRELOAD", preload).env(SOCKET_ENV, socket);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shim_is_an_elf_shared_object() {
        assert_eq!(&SHIM[..4], b"\x7fELF");
        assert_eq!(u16::from_le_bytes([SHIM[16], SHIM[17]]), 3);
    }
}

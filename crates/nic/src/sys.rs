//! The few calls that need `unsafe`. Everything else uses safe wrappers.

use std::io;
use std::path::Path;

/// Mounts bpffs at `/sys/fs/bpf` unless it is mounted there already.
pub(crate) fn ensure_bpffs(dir: &Path) -> io::Result<()> {
    if let Ok(stat) = nix::sys::statfs::statfs(dir) {
        // BPF_FS_MAGIC (include/uapi/linux/magic.h)
        if stat.filesystem_type() == nix::sys::statfs::FsType(0xcafe_4a11) {
            return Ok(());
        }
    }
    std::fs::create_dir_all(dir)?;
    nix::mount::mount(
        Some("bpf"),
        dir,
        Some("bpf"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(io::Error::from)
}

/// The interface index of `dev` in the calling thread's network namespace.
pub(crate) fn ifindex(dev: &str) -> Option<u32> {
    nix::net::if_::if_nametoindex(dev).ok().filter(|&i| i != 0)
}

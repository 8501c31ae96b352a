//! The few calls that need `unsafe`: byte views of the skeleton's `#[repr(C)]`
//! map types. Everything else uses safe wrappers.

use std::io;
use std::mem::size_of;
use std::path::Path;

/// The bytes of a map key or value type generated from the BPF program's BTF.
///
/// Only for the `#[repr(C)]` types of `softrss.h`, whose padding is explicit,
/// so every byte is initialized.
pub(crate) fn pod_bytes<T: Copy>(value: &T) -> &[u8] {
    // SAFETY: T is a repr(C) plain-old-data type without implicit padding
    // (softrss.h spells out every pad field); the slice borrows `value`.
    unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }
}

/// A map key or value read back from the kernel; `None` if the size is wrong.
pub(crate) fn pod_from_bytes<T: Copy>(bytes: &[u8]) -> Option<T> {
    if bytes.len() != size_of::<T>() {
        return None;
    }
    // SAFETY: the length matches and every bit pattern is valid for the
    // integer-only structs of softrss.h; read_unaligned copes with any
    // alignment of the Vec the bytes came in.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

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

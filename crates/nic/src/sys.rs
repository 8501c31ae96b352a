//! The few calls that need `unsafe`: byte views of the skeleton's `#[repr(C)]`
//! map types, and the ethtool ioctl. Everything else uses safe wrappers.

use std::ffi::CString;
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

/// `struct ethtool_value` (include/uapi/linux/ethtool.h).
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

const ETHTOOL_GTXCSUM: u32 = 0x0000_0016;
const ETHTOOL_STXCSUM: u32 = 0x0000_0017;
/// include/uapi/linux/ethtool.h: set GRO.
const ETHTOOL_SGRO: u32 = 0x0000_002c;

fn ethtool_value(dev: &str, cmd: u32, data: u32) -> io::Result<u32> {
    let name = CString::new(dev).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    if name.as_bytes_with_nul().len() > libc::IFNAMSIZ {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut value = EthtoolValue { cmd, data };
    // SAFETY: plain socket(2); the fd is closed below on every path.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = *src as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // SAFETY: SIOCETHTOOL reads ifr and reads/writes the ethtool_value it
    // points to, both of which live until the call returns.
    let ret = unsafe { libc::ioctl(fd, libc::SIOCETHTOOL, &mut ifr) };
    let err = io::Error::last_os_error();
    // SAFETY: fd is ours.
    unsafe { libc::close(fd) };
    if ret < 0 {
        return Err(err);
    }
    Ok(value.data)
}

/// Whether tx checksum offload is on (`ethtool -k DEV` "tx-checksumming"),
/// in the calling thread's network namespace.
pub fn tx_checksum(dev: &str) -> io::Result<bool> {
    ethtool_value(dev, ETHTOOL_GTXCSUM, 0).map(|v| v != 0)
}

/// Turns tx checksum offload on or off (`ethtool -K DEV tx on|off`) with the
/// legacy `ETHTOOL_STXCSUM` ioctl, in the calling thread's network namespace.
pub fn set_tx_checksum(dev: &str, on: bool) -> io::Result<()> {
    ethtool_value(dev, ETHTOOL_STXCSUM, u32::from(on)).map(|_| ())
}

/// Turns generic receive offload on or off (`ethtool -K DEV gro on|off`)
/// with the legacy `ETHTOOL_SGRO` ioctl, in the calling thread's network
/// namespace.
pub fn set_gro(dev: &str, on: bool) -> io::Result<()> {
    ethtool_value(dev, ETHTOOL_SGRO, u32::from(on)).map(|_| ())
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

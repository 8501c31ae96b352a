//! Sysfs as a network namespace sees it.
//!
//! The devices under /sys/class/net are those of the namespace that
//! mounted that sysfs, not of the reading thread (sysfs tags the
//! superblock with the mounter's namespace, fs/sysfs/mount.c
//! `sysfs_init_fs_context`), so a thread that entered a namespace still
//! sees the host's devices there. `ip netns exec` mounts a fresh sysfs in
//! a private mount namespace of a new process. Here a thread inside the
//! namespace makes a *detached* sysfs mount with the new mount API
//! (`fsopen`, `fsconfig`, `fsmount`; Documentation/filesystems/mount_api.rst):
//! it is attached nowhere, so no mount namespace changes, and it goes away
//! when its descriptor closes. Paths are reached through the descriptor.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::HostError;

/// include/uapi/linux/mount.h.
const FSOPEN_CLOEXEC: libc::c_uint = 0x1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 0x1;
const MOUNT_ATTR_NOSUID: libc::c_uint = 0x2;
const MOUNT_ATTR_NODEV: libc::c_uint = 0x4;
const MOUNT_ATTR_NOEXEC: libc::c_uint = 0x8;

/// A detached sysfs mount showing one namespace's devices.
#[derive(Debug)]
pub struct Sysfs {
    root: OwnedFd,
    netns: String,
}

impl Sysfs {
    /// Mounts sysfs as namespace `netns` sees it.
    pub fn of(netns: &str) -> Result<Sysfs, HostError> {
        let root = crate::netns::run_in(Some(netns), detached_sysfs)?
            .map_err(|e| HostError::io(format!("mounting sysfs of namespace {netns}"), e))?;
        Ok(Sysfs {
            root,
            netns: netns.to_string(),
        })
    }

    /// `relative` (to /sys, e.g. `class/net/eth0/threaded`) in this mount.
    /// The path holds while `self` lives.
    pub fn path(&self, relative: &str) -> PathBuf {
        Path::new(&format!("/proc/self/fd/{}", self.root.as_raw_fd()))
            .join(relative.trim_start_matches('/'))
    }

    /// Writes `value` to the file `relative` to /sys.
    pub fn write(&self, relative: &str, value: &str) -> Result<(), HostError> {
        std::fs::write(self.path(relative), value).map_err(|e| {
            HostError::io(
                format!("writing {value} to /sys/{relative} in {}", self.netns),
                e,
            )
        })
    }

    /// The names in the directory `relative` to /sys, sorted.
    pub fn list(&self, relative: &str) -> Result<Vec<String>, HostError> {
        let what = || format!("listing /sys/{relative} in {}", self.netns);
        let mut names = std::fs::read_dir(self.path(relative))
            .map_err(|e| HostError::io(what(), e))?
            .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<io::Result<Vec<_>>>()
            .map_err(|e| HostError::io(what(), e))?;
        names.sort();
        Ok(names)
    }
}

/// A sysfs mount made by the calling thread, attached nowhere.
fn detached_sysfs() -> io::Result<OwnedFd> {
    let name = CString::new("sysfs").expect("no NUL");
    // SAFETY: fsopen takes a NUL-terminated name and flags; it returns a
    // new descriptor or -1.
    let context =
        owned_fd(unsafe { libc::syscall(libc::SYS_fsopen, name.as_ptr(), FSOPEN_CLOEXEC) })?;
    // SAFETY: CMD_CREATE takes no key, value or aux (NULL, NULL, 0) on the
    // descriptor fsopen returned, which `context` owns. It returns 0 or -1,
    // not a descriptor.
    let created = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            context.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    };
    if created < 0 {
        return Err(io::Error::last_os_error());
    }
    let attributes = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    // SAFETY: fsmount takes the configured context and two flag words; it
    // returns a new descriptor or -1.
    owned_fd(unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            context.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            attributes,
        )
    })
}

/// The descriptor a syscall returned, owned, or the errno it set.
fn owned_fd(ret: libc::c_long) -> io::Result<OwnedFd> {
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(ret).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: the kernel just returned `fd` as a new descriptor, owned by
    // no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "needs root (network namespaces, mounts)"]
    fn a_namespaces_sysfs_shows_its_devices_and_not_the_hosts() {
        let ns = crate::test_lab::veth_pair("hostsysfs");
        let sysfs = Sysfs::of(ns[0].name()).unwrap();
        assert_eq!(sysfs.list("class/net").unwrap(), ["lo", "va"]);
        // The device's tx queue length, written and read back.
        sysfs.write("class/net/va/tx_queue_len", "77").unwrap();
        let back = std::fs::read_to_string(sysfs.path("class/net/va/tx_queue_len")).unwrap();
        assert_eq!(back.trim(), "77");
        let e = sysfs.write("class/net/nosuch/mtu", "1").unwrap_err();
        assert!(e.to_string().contains("class/net/nosuch/mtu"), "{e}");
        // Mounting again and again works and leaves other descriptors
        // alone (a status word of 0 taken for a descriptor once closed
        // stdin, and the next mount then failed).
        let stdin_open = || nix::fcntl::fcntl(0, nix::fcntl::FcntlArg::F_GETFD).is_ok();
        let stdin_was_open = stdin_open();
        for _ in 0..3 {
            let again = Sysfs::of(ns[0].name()).unwrap();
            assert_eq!(again.list("class/net").unwrap(), ["lo", "va"]);
        }
        assert_eq!(stdin_open(), stdin_was_open);
        let e = Sysfs::of("hostsysfs-none").unwrap_err();
        assert!(e.to_string().contains("hostsysfs-none"), "{e}");
    }
}

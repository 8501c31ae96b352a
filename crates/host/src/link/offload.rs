//! Offload settings of a device through the legacy ethtool ioctls
//! (`SIOCETHTOOL` with `struct ethtool_value`, include/uapi/linux/ethtool.h):
//! what `ethtool -k` reads and `ethtool -K DEV tx|gro on|off` sets, without
//! the program.

use std::ffi::CString;
use std::io;

use crate::HostError;

/// `struct ethtool_value` (include/uapi/linux/ethtool.h).
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

const ETHTOOL_GTXCSUM: u32 = 0x0000_0016;
const ETHTOOL_STXCSUM: u32 = 0x0000_0017;
const ETHTOOL_SGRO: u32 = 0x0000_002c;

/// Whether tx checksum offload is on for `dev` in `netns` (`ethtool -k`
/// "tx-checksumming").
pub fn tx_checksum(netns: Option<&str>, dev: &str) -> Result<bool, HostError> {
    ethtool(
        netns,
        dev,
        ETHTOOL_GTXCSUM,
        0,
        "reading tx checksum offload",
    )
    .map(|v| v != 0)
}

/// Turns tx checksum offload (and with it TSO) of `dev` in `netns` on or
/// off (`ethtool -K DEV tx on|off`, `ETHTOOL_STXCSUM`).
pub fn set_tx_checksum(netns: Option<&str>, dev: &str, on: bool) -> Result<(), HostError> {
    let what = format!("ethtool -K {dev} tx {}", on_off(on));
    ethtool(netns, dev, ETHTOOL_STXCSUM, u32::from(on), &what).map(drop)
}

/// Turns generic receive offload of `dev` in `netns` on or off
/// (`ethtool -K DEV gro on|off`, `ETHTOOL_SGRO`).
pub fn set_gro(netns: Option<&str>, dev: &str, on: bool) -> Result<(), HostError> {
    let what = format!("ethtool -K {dev} gro {}", on_off(on));
    ethtool(netns, dev, ETHTOOL_SGRO, u32::from(on), &what).map(drop)
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

/// One `ethtool_value` ioctl on `dev`, from a thread inside `netns`.
fn ethtool(
    netns: Option<&str>,
    dev: &str,
    cmd: u32,
    data: u32,
    what: &str,
) -> Result<u32, HostError> {
    let name = dev.to_string();
    let result = crate::netns::run_in(netns, move || ethtool_value(&name, cmd, data))?;
    result.map_err(|e| HostError::io(format!("{what} (device {dev})"), e))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_that_is_not_there_is_an_error_naming_it() {
        let e = tx_checksum(None, "steer-nodev0").unwrap_err().to_string();
        assert!(e.contains("steer-nodev0"), "{e}");
        let e = set_gro(None, "a-name-longer-than-ifnamsiz", true).unwrap_err();
        assert!(e.to_string().contains("gro on"), "{e}");
    }
}

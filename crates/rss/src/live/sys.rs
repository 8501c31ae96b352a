//! The only `unsafe` code of `rss::live`: the `SIOCETHTOOL` ioctls that have
//! no netlink equivalent Steer can rely on, and `if_nametoindex`.
//!
//! Structures are from include/uapi/linux/ethtool.h; each call passes a
//! zeroed, 8-byte aligned buffer at least as large as the kernel structure,
//! and every field is read back from bytes with bounds checks.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `SIOCETHTOOL` (include/uapi/linux/sockios.h).
const SIOCETHTOOL: libc::c_ulong = 0x8946;
/// `ETHTOOL_GDRVINFO`: `struct ethtool_drvinfo`.
const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;
/// `ETHTOOL_GRXFH`: hashed fields of one flow type (`struct ethtool_rxnfc`).
const ETHTOOL_GRXFH: u32 = 0x0000_0029;
/// `ETHTOOL_GRSSH`: RSS hash key, function and table (`struct ethtool_rxfh`).
const ETHTOOL_GRSSH: u32 = 0x0000_0046;

/// `struct ethtool_drvinfo` is 196 bytes; `driver[32]` at offset 4.
const DRVINFO_LEN: usize = 196;
/// `struct ethtool_rxnfc` is 192 bytes on 64-bit; `data` (u64) at offset 8.
/// The kernel copies only cmd, flow_type and data for GRXFH.
const RXNFC_LEN: usize = 256;
/// `struct ethtool_rxfh` header: cmd, rss_context, indir_size, key_size (u32),
/// hfunc, input_xfrm (u8), rsvd8[2], rsvd32 (u32), then `rss_config[]`.
const RXFH_HEADER_LEN: usize = 24;

/// Largest table / key the fallback accepts (a sanity bound against a broken
/// driver making us allocate gigabytes).
const MAX_INDIR: usize = 65536;
const MAX_KEY: usize = 4096;

/// `struct ifreq` with the `ifr_data` member: name[IFNAMSIZ] then a pointer,
/// padded to the union's 24 bytes.
#[repr(C)]
struct IfReqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// What `ETHTOOL_GRSSH` returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rxfh {
    pub hfunc: u8,
    pub input_xfrm: u8,
    pub indir: Vec<u32>,
    pub key: Vec<u8>,
}

/// An `AF_INET` datagram socket used only as a handle for `SIOCETHTOOL`.
pub struct EthtoolIoctl {
    fd: OwnedFd,
}

impl EthtoolIoctl {
    pub fn open() -> io::Result<Self> {
        // SAFETY: socket(2) with constant arguments; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(EthtoolIoctl {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Runs one ethtool command; `buf` holds the command structure, with the
    /// command number already in its first 4 bytes.
    fn call(&self, dev: &str, buf: &mut [u64]) -> io::Result<()> {
        let mut ifr = IfReqData {
            name: [0; libc::IFNAMSIZ],
            data: buf.as_mut_ptr().cast(),
            _pad: [0; 16],
        };
        let name = dev.as_bytes();
        if name.len() >= libc::IFNAMSIZ || name.contains(&0) {
            return Err(io::Error::from_raw_os_error(libc::ENODEV));
        }
        ifr.name[..name.len()].copy_from_slice(name);
        // SAFETY: ifr is a valid ifreq whose data pointer refers to `buf`,
        // which lives across the call and is at least as large as the
        // structure the command reads and writes (checked by the callers).
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The driver name (`ethtool -i`).
    pub fn driver(&self, dev: &str) -> io::Result<String> {
        let mut buf = vec![0u64; DRVINFO_LEN.div_ceil(8)];
        set_u32(&mut buf, 0, ETHTOOL_GDRVINFO);
        self.call(dev, &mut buf)?;
        let bytes = to_bytes(&buf);
        let field = &bytes[4..36];
        let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
        Ok(String::from_utf8_lossy(&field[..end]).into_owned())
    }

    /// The `RXH_*` bits hashed for one flow type (`ethtool -n DEV rx-flow-hash`).
    pub fn rx_flow_hash(&self, dev: &str, flow_type: u32) -> io::Result<u64> {
        let mut buf = vec![0u64; RXNFC_LEN / 8];
        set_u32(&mut buf, 0, ETHTOOL_GRXFH);
        set_u32(&mut buf, 4, flow_type);
        self.call(dev, &mut buf)?;
        Ok(buf[1])
    }

    /// The RSS configuration (`ethtool -x`), in two calls: sizes first, then
    /// the table and key (net/ethtool/ioctl.c ethtool_get_rxfh).
    pub fn rxfh(&self, dev: &str) -> io::Result<Rxfh> {
        let mut head = vec![0u64; RXFH_HEADER_LEN / 8];
        set_u32(&mut head, 0, ETHTOOL_GRSSH);
        self.call(dev, &mut head)?;
        let bytes = to_bytes(&head);
        let indir_size = get_u32(&bytes, 8) as usize;
        let key_size = get_u32(&bytes, 12) as usize;
        if indir_size > MAX_INDIR || key_size > MAX_KEY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "ETHTOOL_GRSSH reports a {indir_size}-entry table and a {key_size}-byte key"
                ),
            ));
        }
        let total = RXFH_HEADER_LEN + indir_size * 4 + key_size;
        let mut buf = vec![0u64; total.div_ceil(8)];
        set_u32(&mut buf, 0, ETHTOOL_GRSSH);
        set_u32(&mut buf, 8, indir_size as u32);
        set_u32(&mut buf, 12, key_size as u32);
        self.call(dev, &mut buf)?;
        let bytes = to_bytes(&buf);
        parse_rxfh(&bytes).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "ETHTOOL_GRSSH reply is truncated",
            )
        })
    }
}

/// Decodes a filled `struct ethtool_rxfh` (header, then `indir_size` u32
/// entries, then `key_size` key bytes).
pub fn parse_rxfh(bytes: &[u8]) -> Option<Rxfh> {
    let indir_size = usize::try_from(get_u32_checked(bytes, 8)?).ok()?;
    let key_size = usize::try_from(get_u32_checked(bytes, 12)?).ok()?;
    let indir_end = RXFH_HEADER_LEN.checked_add(indir_size.checked_mul(4)?)?;
    let key_end = indir_end.checked_add(key_size)?;
    let indir = bytes
        .get(RXFH_HEADER_LEN..indir_end)?
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Some(Rxfh {
        hfunc: *bytes.get(16)?,
        input_xfrm: *bytes.get(17)?,
        indir,
        key: bytes.get(indir_end..key_end)?.to_vec(),
    })
}

/// The interface index of `dev`, or ENODEV.
pub fn if_nametoindex(dev: &str) -> io::Result<u32> {
    let name = CString::new(dev).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))?;
    // SAFETY: name is a valid NUL-terminated string for the call's duration.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(index)
}

fn to_bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

fn set_u32(words: &mut [u64], offset: usize, value: u32) {
    let mut bytes = to_bytes(words);
    bytes[offset..offset + 4].copy_from_slice(&value.to_ne_bytes());
    for (w, c) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *w = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
    }
}

fn get_u32(bytes: &[u8], offset: usize) -> u32 {
    get_u32_checked(bytes, offset).unwrap_or(0)
}

fn get_u32_checked(bytes: &[u8], offset: usize) -> Option<u32> {
    let b: [u8; 4] = bytes.get(offset..offset.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_ne_bytes(b))
}

/// Names of the network devices in the calling thread's network namespace
/// (if_nameindex(3), which asks the kernel over netlink, so it is netns-aware
/// where /sys/class/net is not).
pub fn interface_names() -> io::Result<Vec<String>> {
    // SAFETY: if_nameindex returns a heap array terminated by an entry with
    // index 0 and a null name, or null on error; it is freed once below.
    unsafe {
        let head = libc::if_nameindex();
        if head.is_null() {
            return Err(io::Error::last_os_error());
        }
        let mut names = Vec::new();
        let mut entry = head;
        while (*entry).if_index != 0 && !(*entry).if_name.is_null() {
            names.push(
                std::ffi::CStr::from_ptr((*entry).if_name)
                    .to_string_lossy()
                    .into_owned(),
            );
            entry = entry.add(1);
        }
        libc::if_freenameindex(head);
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifreq_has_kernel_size() {
        assert_eq!(std::mem::size_of::<IfReqData>(), 40);
    }

    #[test]
    fn rxfh_decodes_from_bytes() {
        let mut b = vec![0u8; RXFH_HEADER_LEN];
        b[0..4].copy_from_slice(&ETHTOOL_GRSSH.to_ne_bytes());
        b[8..12].copy_from_slice(&2u32.to_ne_bytes());
        b[12..16].copy_from_slice(&3u32.to_ne_bytes());
        b[16] = 1; // ETH_RSS_HASH_TOP
        b[17] = 1; // RXH_XFRM_SYM_XOR
        b.extend_from_slice(&1u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&[0xaa, 0xbb, 0xcc]);
        assert_eq!(
            parse_rxfh(&b),
            Some(Rxfh {
                hfunc: 1,
                input_xfrm: 1,
                indir: vec![1, 0],
                key: vec![0xaa, 0xbb, 0xcc]
            })
        );
        assert_eq!(parse_rxfh(&b[..b.len() - 1]), None, "truncated key");
    }

    #[test]
    fn u32_helpers_round_trip() {
        let mut w = vec![0u64; 2];
        set_u32(&mut w, 4, 0xdead_beef);
        assert_eq!(get_u32(&to_bytes(&w), 4), 0xdead_beef);
        assert_eq!(get_u32_checked(&to_bytes(&w), 14), None);
    }

    #[test]
    fn missing_device_has_no_index() {
        let err = if_nametoindex("steer-nosuch0").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENODEV));
        assert!(if_nametoindex("lo").unwrap() > 0);
    }
}

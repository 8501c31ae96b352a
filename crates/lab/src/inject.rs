//! Sending hand-built frames out of a lab device with an `AF_PACKET` socket
//! (packet(7)), from inside the host's namespace.

use std::io;

use crate::LabError;

/// Frames sent back to back before a short pause; veth's ring towards an XDP
/// peer holds 256 frames, and a full ring drops.
const BURST: usize = 32;

/// Sends `frames` out of `dev` in namespace `netns`, in order, pausing
/// between bursts so the receiving veth's ring never overflows.
pub fn send_frames(netns: &str, dev: &str, frames: Vec<Vec<u8>>) -> Result<usize, LabError> {
    let dev = dev.to_string();
    host::netns::run_in(Some(netns), move || send_here(&dev, &frames))?
}

fn send_here(dev: &str, frames: &[Vec<u8>]) -> Result<usize, LabError> {
    let err = |op: &str, e: io::Error| LabError::io(format!("{op} ({dev})"), e);
    let name = std::ffi::CString::new(dev)
        .map_err(|_| LabError::InvalidSpec(format!("device name '{dev}'")))?;
    // SAFETY: if_nametoindex reads a NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(err("if_nametoindex", io::Error::last_os_error()));
    }
    // SAFETY: plain socket(2); closed below. Protocol 0: send only.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(err("socket(AF_PACKET)", io::Error::last_os_error()));
    }
    let result = (|| {
        // SAFETY: sockaddr_ll is plain data; zero is valid.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_ifindex = ifindex as i32;
        addr.sll_halen = 6;
        let mut sent = 0;
        for (i, frame) in frames.iter().enumerate() {
            if frame.len() >= 6 {
                addr.sll_addr[..6].copy_from_slice(&frame[..6]);
            }
            // SAFETY: the buffer and address are valid for the call.
            let n = unsafe {
                libc::sendto(
                    fd,
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&addr as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                )
            };
            if n < 0 {
                return Err(err("sendto", io::Error::last_os_error()));
            }
            sent += 1;
            if (i + 1) % BURST == 0 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        Ok(sent)
    })();
    // SAFETY: fd is ours.
    unsafe { libc::close(fd) };
    result
}

/// The MAC address of `dev` in `netns` (`ip -j link show`).
pub fn mac_address(netns: &str, dev: &str) -> Result<[u8; 6], LabError> {
    let out = host::command::ip(&["-n", netns, "-j", "link", "show", "dev", dev])?;
    let value: serde_json::Value = serde_json::from_str(&out).map_err(|e| LabError::Command {
        command: format!("ip -n {netns} -j link show dev {dev}"),
        stderr: e.to_string(),
    })?;
    value[0]["address"]
        .as_str()
        .and_then(crate::packet::parse_mac)
        .ok_or_else(|| LabError::Command {
            command: format!("ip -n {netns} -j link show dev {dev}"),
            stderr: "no MAC address".into(),
        })
}

//! Sending hand-built frames out of a lab device, through the project's
//! packet I/O (`pktio`: an `AF_PACKET` socket in the host's namespace,
//! `sendmmsg` batches).

use pktio::{Port, PortConfig};

use crate::LabError;

/// Frames sent back to back before a short pause; veth's ring towards an XDP
/// peer holds 256 frames, and a full ring drops.
const BURST: usize = 32;

/// Sends `frames` out of `dev` in namespace `netns`, in order, pausing
/// between bursts so the receiving veth's ring never overflows. Returns how
/// many the device accepted; a frame it refused is an error.
pub fn send_frames(netns: &str, dev: &str, frames: Vec<Vec<u8>>) -> Result<usize, LabError> {
    // Send only: the smallest receive ring a port has.
    let config = PortConfig {
        rx_frames: 32,
        ..PortConfig::default()
    };
    let mut port = Port::open(dev, Some(netns), &config)?;
    let mut sent = 0;
    for burst in frames.chunks(BURST) {
        sent += port.send_batch(burst)?;
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let refused = port.stats().tx_errors;
    if refused > 0 {
        return Err(LabError::Command {
            command: format!("send {} frames out of {dev} in {netns}", frames.len()),
            stderr: format!("the device refused {refused} of them"),
        });
    }
    Ok(sent)
}

/// The MAC address of `dev` in `netns` (`IFLA_ADDRESS`, over netlink).
pub fn mac_address(netns: &str, dev: &str) -> Result<[u8; 6], LabError> {
    host::link::link(Some(netns), dev)?
        .mac
        .ok_or_else(|| LabError::Command {
            command: format!("reading the MAC address of {dev} in {netns}"),
            stderr: "the device has no Ethernet address".into(),
        })
}

/// An AF_XDP port on `host`'s lab device, and the device's MAC: what a
/// userspace data path (the `toe` endpoint) serving the host sends and
/// receives with. The device must carry no other XDP program (a lab built
/// without software RSS leaves it free).
pub fn xdp_port(host: &crate::Host) -> Result<(Port, [u8; 6]), LabError> {
    let config = PortConfig {
        backend: pktio::Backend::Xdp,
        ..PortConfig::default()
    };
    let port = Port::open(&host.dev, Some(&host.netns), &config)?;
    Ok((port, mac_address(&host.netns, &host.dev)?))
}

/// Turns tx checksum offload (and with it TSO) off on every host of `lab`
/// but `host`: a data path on `host`'s AF_XDP port ([`xdp_port`]) sees
/// their frames before the checksums left to offload are filled in, so
/// they compute them in software ("The checksum pitfall" in the crate
/// docs).
pub fn checksums_in_software_towards(lab: &crate::Lab, host: &crate::Host) -> Result<(), LabError> {
    for other in lab.hosts().iter().filter(|h| h.name != host.name) {
        host::link::set_tx_checksum(Some(&other.netns), &other.dev, false)?;
    }
    Ok(())
}

//! Live TCP sockets from the kernel's `sock_diag` netlink interface
//! (`inet_diag`, include/uapi/linux/inet_diag.h; what `ss -ti` reads), so the
//! CLI can place every connection on a core and flag cores that carry more
//! than one busy flow.

use std::net::SocketAddr;

use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::nlas::Nla;
use netlink_packet_sock_diag::inet::{
    ExtensionFlags, InetRequest, InetResponse, SocketId, StateFlags,
};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_sys::protocols::NETLINK_SOCK_DIAG;
use serde::Serialize;

use super::error::LiveError;
use super::netlink::NlSocket;

/// One TCP connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TcpSocket {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// `ESTABLISHED`, `SYN-SENT`, ... (as `ss` prints them).
    pub state: String,
    /// `tcpi_bytes_received` (Linux 4.1+), None when the kernel sent no
    /// `tcp_info` or a shorter one.
    pub bytes_received: Option<u64>,
    /// `tcpi_bytes_acked` (Linux 4.1+).
    pub bytes_acked: Option<u64>,
    /// `tcpi_bytes_sent` (Linux 4.19+).
    pub bytes_sent: Option<u64>,
}

/// TCP states from include/net/tcp_states.h, named as `ss` names them.
pub fn tcp_state_name(state: u8) -> &'static str {
    match state {
        1 => "ESTABLISHED",
        2 => "SYN-SENT",
        3 => "SYN-RECV",
        4 => "FIN-WAIT-1",
        5 => "FIN-WAIT-2",
        6 => "TIME-WAIT",
        7 => "CLOSE",
        8 => "CLOSE-WAIT",
        9 => "LAST-ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "NEW-SYN-RECV",
        _ => "UNKNOWN",
    }
}

/// Offsets in `struct tcp_info` (include/uapi/linux/tcp.h): 8 bytes of u8
/// fields, 24 u32 fields, then `tcpi_pacing_rate`, `tcpi_max_pacing_rate`,
/// `tcpi_bytes_acked`, `tcpi_bytes_received` (u64) ...
const TCPI_BYTES_ACKED: usize = 120;
const TCPI_BYTES_RECEIVED: usize = 128;
/// ... and after the delivery/busy-time fields, `tcpi_bytes_sent`.
const TCPI_BYTES_SENT: usize = 200;

fn u64_at(info: &[u8], offset: usize) -> Option<u64> {
    let bytes: [u8; 8] = info.get(offset..offset + 8)?.try_into().ok()?;
    Some(u64::from_ne_bytes(bytes))
}

/// The byte counters of a raw `tcp_info` (`INET_DIAG_INFO` attribute); a
/// field beyond the end of what this kernel sent is None.
pub fn tcp_info_bytes(info: &[u8]) -> (Option<u64>, Option<u64>, Option<u64>) {
    (
        u64_at(info, TCPI_BYTES_RECEIVED),
        u64_at(info, TCPI_BYTES_ACKED),
        u64_at(info, TCPI_BYTES_SENT),
    )
}

fn to_socket(response: &InetResponse) -> TcpSocket {
    let id = &response.header.socket_id;
    let info = response.nlas.iter().find_map(|nla| match nla {
        Nla::TcpInfo(bytes) => Some(bytes.as_slice()),
        _ => None,
    });
    let (bytes_received, bytes_acked, bytes_sent) = info.map_or((None, None, None), tcp_info_bytes);
    TcpSocket {
        local: SocketAddr::new(id.source_address, id.source_port),
        remote: SocketAddr::new(id.destination_address, id.destination_port),
        state: tcp_state_name(response.header.state).to_string(),
        bytes_received,
        bytes_acked,
        bytes_sent,
    }
}

/// States of connections that can carry data (everything but LISTEN,
/// TIME-WAIT, CLOSE and NEW-SYN-RECV).
fn connected_states() -> StateFlags {
    StateFlags::ESTABLISHED
        | StateFlags::SYN_SENT
        | StateFlags::SYN_RECV
        | StateFlags::FIN_WAIT1
        | StateFlags::FIN_WAIT2
        | StateFlags::CLOSE_WAIT
        | StateFlags::LAST_ACK
        | StateFlags::CLOSING
}

/// Every connected IPv4 and IPv6 TCP socket in this network namespace, with
/// the byte counters of `tcp_info`.
pub fn tcp_sockets() -> Result<Vec<TcpSocket>, LiveError> {
    let what = "sock_diag TCP dump";
    let mut socket = NlSocket::open(NETLINK_SOCK_DIAG).map_err(|e| e.into_live(what, ""))?;
    let mut out = Vec::new();
    for (family, socket_id) in [
        (AF_INET, SocketId::new_v4()),
        (AF_INET6, SocketId::new_v6()),
    ] {
        let request = SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::INFO,
            states: connected_states(),
            socket_id,
        });
        let replies = match socket.request(request, true) {
            Ok(r) => r,
            // A kernel without IPv6 answers the AF_INET6 dump with ENOENT.
            Err(e) if family == AF_INET6 && e.errno() == Some(libc::ENOENT) => continue,
            Err(e) => return Err(e.into_live(what, "")),
        };
        out.extend(replies.iter().filter_map(|m| match m {
            SockDiagMessage::InetResponse(r) => Some(to_socket(r)),
            _ => None,
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_info_offsets() {
        let mut info = vec![0u8; 232];
        info[TCPI_BYTES_ACKED..TCPI_BYTES_ACKED + 8].copy_from_slice(&5u64.to_ne_bytes());
        info[TCPI_BYTES_RECEIVED..TCPI_BYTES_RECEIVED + 8].copy_from_slice(&7u64.to_ne_bytes());
        info[TCPI_BYTES_SENT..TCPI_BYTES_SENT + 8].copy_from_slice(&9u64.to_ne_bytes());
        assert_eq!(tcp_info_bytes(&info), (Some(7), Some(5), Some(9)));
        // A 4.1-era tcp_info (up to tcpi_segs_in) has no bytes_sent.
        assert_eq!(tcp_info_bytes(&info[..144]), (Some(7), Some(5), None));
        assert_eq!(tcp_info_bytes(&[]), (None, None, None));
    }

    #[test]
    fn state_names() {
        assert_eq!(tcp_state_name(1), "ESTABLISHED");
        assert_eq!(tcp_state_name(10), "LISTEN");
        assert_eq!(tcp_state_name(200), "UNKNOWN");
    }
}

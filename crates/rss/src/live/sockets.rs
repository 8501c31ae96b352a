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
use super::netlink::IntoLive;
use host::netlink::NlSocket;

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

/// Requests per datagram in [`SockDiag::connected`]: the replies of one
/// datagram must fit the socket's default receive buffer together.
const EXACT_BATCH: usize = 32;

/// States of a connection that can carry data (see [`connected_states`]).
fn is_connected_state(state: u8) -> bool {
    matches!(state, 1..=5 | 8 | 9 | 11)
}

/// An open `sock_diag` socket for exact lookups, kept open so repeated
/// checks do not pay for socket setup.
pub struct SockDiag {
    socket: NlSocket,
}

impl SockDiag {
    pub fn open() -> Result<Self, LiveError> {
        let socket =
            NlSocket::open(NETLINK_SOCK_DIAG).map_err(|e| e.into_live("sock_diag socket", ""))?;
        Ok(SockDiag { socket })
    }

    /// Whether each (local, remote) pair is a connected TCP socket of this
    /// network namespace right now. Each pair is one exact `sock_diag`
    /// request (`inet_diag_find_one_icsk`: a hash lookup), where a dump
    /// walks every bucket of the established hash (262,144 on a 24 GiB
    /// host, whatever the number of sockets): microseconds instead of
    /// milliseconds. Sent in batches of [`EXACT_BATCH`] per datagram.
    pub fn connected(
        &mut self,
        pairs: &[(SocketAddr, SocketAddr)],
    ) -> Result<Vec<bool>, LiveError> {
        let mut out = Vec::with_capacity(pairs.len());
        for chunk in pairs.chunks(EXACT_BATCH) {
            let requests = chunk.iter().map(|&(l, r)| exact_request(l, r)).collect();
            let answers = self
                .socket
                .request_each(requests)
                .map_err(|e| e.into_live("sock_diag TCP lookup", ""))?;
            for (&(local, remote), answer) in chunk.iter().zip(answers) {
                out.push(match answer {
                    Ok(replies) => replies.iter().any(|m| is_that_connection(m, local, remote)),
                    // ENOENT: no such socket.
                    Err(e) if e.errno() == Some(libc::ENOENT) => false,
                    Err(e) => return Err(e.into_live("sock_diag TCP lookup", "")),
                });
            }
        }
        Ok(out)
    }
}

fn exact_request(local: SocketAddr, remote: SocketAddr) -> SockDiagMessage {
    SockDiagMessage::InetRequest(InetRequest {
        family: if local.is_ipv4() { AF_INET } else { AF_INET6 },
        protocol: IPPROTO_TCP,
        extensions: ExtensionFlags::empty(),
        states: StateFlags::all(),
        socket_id: SocketId {
            source_port: local.port(),
            destination_port: remote.port(),
            source_address: local.ip(),
            destination_address: remote.ip(),
            interface_id: 0,
            // INET_DIAG_NOCOOKIE: match by address, not by socket cookie.
            cookie: [0xff; 8],
        },
    })
}

/// The lookup falls back to a listener on the local port when no
/// connection matches: only a connected socket with both ports counts.
fn is_that_connection(message: &SockDiagMessage, local: SocketAddr, remote: SocketAddr) -> bool {
    let SockDiagMessage::InetResponse(r) = message else {
        return false;
    };
    let id = &r.header.socket_id;
    is_connected_state(r.header.state)
        && id.source_port == local.port()
        && id.destination_port == remote.port()
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

    /// Real sockets on loopback (no privileges needed): a live connection
    /// is found from both ends, a closed one and a listener's port with a
    /// made-up peer are not.
    #[test]
    fn exact_lookups_find_only_live_connections() {
        use std::net::{TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let client_side = (client.local_addr().unwrap(), client.peer_addr().unwrap());
        let server_side = (server.local_addr().unwrap(), server.peer_addr().unwrap());
        let made_up = (
            listener.local_addr().unwrap(),
            "127.0.0.1:9".parse().unwrap(),
        );
        let mut diag = SockDiag::open().unwrap();
        assert_eq!(
            diag.connected(&[client_side, server_side, made_up])
                .unwrap(),
            [true, true, false]
        );
        // Past one datagram's batch: answers stay in order.
        let many: Vec<_> = (0..EXACT_BATCH * 2 + 3)
            .map(|i| if i % 3 == 0 { client_side } else { made_up })
            .collect();
        let found = diag.connected(&many).unwrap();
        assert!(found.iter().enumerate().all(|(i, &f)| f == (i % 3 == 0)));
        // Closed with RST (linger 0): no TIME-WAIT left behind.
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        nix::sys::socket::setsockopt(&client, nix::sys::socket::sockopt::Linger, &linger).unwrap();
        drop(client);
        drop(server);
        assert_eq!(diag.connected(&[client_side]).unwrap(), [false]);
        assert_eq!(diag.connected(&[]).unwrap(), Vec::<bool>::new());
    }

    #[test]
    fn state_names() {
        assert_eq!(tcp_state_name(1), "ESTABLISHED");
        assert_eq!(tcp_state_name(10), "LISTEN");
        assert_eq!(tcp_state_name(200), "UNKNOWN");
    }
}

//! `rss::live::tcp_sockets` finds a loopback connection this test opens.

#![cfg(feature = "live")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use rss::live::tcp_sockets;

#[test]
fn finds_own_loopback_connection_with_byte_counts() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server_addr = listener.local_addr().unwrap();
    let mut client = TcpStream::connect(server_addr).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    let client_addr = client.local_addr().unwrap();
    let payload = vec![7u8; 10_000];
    client.write_all(&payload).unwrap();
    let mut got = vec![0u8; payload.len()];
    server.read_exact(&mut got).unwrap();

    let sockets = match tcp_sockets() {
        Ok(s) => s,
        Err(e) if e.is_environment() => {
            testkit::missing(&format!("sock_diag (the kernel's inet_diag/tcp_diag): {e}"))
        }
        Err(e) => panic!("tcp_sockets: {e}"),
    };
    let client_side = sockets
        .iter()
        .find(|s| s.local == client_addr && s.remote == server_addr)
        .unwrap_or_else(|| panic!("client socket {client_addr} not in {sockets:#?}"));
    let server_side = sockets
        .iter()
        .find(|s| s.local == server_addr && s.remote == client_addr)
        .expect("server side of the connection");
    println!("{client_side:?}\n{server_side:?}");
    assert_eq!(client_side.state, "ESTABLISHED");
    assert_eq!(server_side.state, "ESTABLISHED");
    // tcp_info counters (Linux 4.1+ / 4.19+): the client sent 10000 bytes,
    // acknowledged by the server, which received them.
    assert_eq!(server_side.bytes_received, Some(10_000));
    assert_eq!(client_side.bytes_acked.map(|b| b >= 10_000), Some(true));
    assert_eq!(client_side.bytes_sent, Some(10_000));
    // The listener itself is not a connection.
    assert!(!sockets
        .iter()
        .any(|s| s.local == server_addr && s.state == "LISTEN"));
}

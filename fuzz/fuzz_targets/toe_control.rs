//! A context's control requests (`struct toe_req`, toe_app.h) as the
//! service reads them off its socket, checked into commands
//! (`toe::app::request`): any bytes, of any length, give a command or the
//! errno its reply carries, never a panic; a command's fields are in
//! range; and a command's own request parses back to it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toe::app::layout::SLOTS;
use toe::app::request::{request_bytes, Command};

// Records: a length byte, then that many bytes (a request is 32; other
// lengths are the malformed messages a peer could send).
fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let (msg, next) = tail.split_at((len as usize).min(tail.len()));
        rest = next;
        match Command::parse(msg) {
            Ok(c) => {
                match c {
                    Command::Listen { port } => assert_ne!(port, 0),
                    Command::Connect { remote, local_port } => {
                        assert_ne!(remote.port(), 0);
                        assert_ne!(local_port, Some(0));
                    }
                    Command::Close { slot } => assert!(slot < SLOTS),
                    _ => {}
                }
                assert_eq!(Command::parse(&request_bytes(&c.request())), Ok(c));
            }
            Err(e) => assert!(
                [libc::EPROTO, libc::EINVAL, libc::EAFNOSUPPORT, libc::EBADF].contains(&e),
                "{e}"
            ),
        }
    }
});

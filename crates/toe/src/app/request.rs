//! A control request checked once, as it comes off the control socket: a
//! fixed-size `struct toe_req` becomes a [`Command`] whose fields are in
//! range, or the errno its reply carries. The service acts on commands
//! only, so no field from another process reaches it unchecked.

use std::mem::size_of;
use std::net::SocketAddr;

use super::layout::{Op, Request, SLOTS};
use super::shm::{addr_bytes, ip_of};

/// What an application asks of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// A new context: its shared memory and doorbell.
    Hello,
    /// A forked child's control connection joins context `context`.
    Join { context: u32 },
    /// Accept connections to `port` (never 0).
    Listen { port: u16 },
    /// The next connection of listener `listener`.
    Accept { listener: u32 },
    /// Open a connection to `remote` (a port other than 0), from
    /// `local_port` when the socket was bound to one.
    Connect {
        remote: SocketAddr,
        local_port: Option<u16>,
    },
    /// The application is done with slot `slot` (below [`SLOTS`]).
    Close { slot: usize },
    /// Stop listener `listener`.
    Unlisten { listener: u32 },
}

impl Command {
    /// A request's bytes, exactly `struct toe_req`'s size (native byte
    /// order: both ends run on this machine).
    pub fn parse(bytes: &[u8]) -> Result<Command, i32> {
        Command::of(&request_of(bytes).ok_or(libc::EPROTO)?)
    }

    /// Checks a request: EPROTO for an unknown operation, EINVAL for a
    /// zero port, EAFNOSUPPORT for a family other than 4 or 6, EBADF for a
    /// slot out of range.
    pub fn of(req: &Request) -> Result<Command, i32> {
        let port = |p: u16| if p == 0 { Err(libc::EINVAL) } else { Ok(p) };
        Ok(match Op::of(req.op).ok_or(libc::EPROTO)? {
            Op::Hello => Command::Hello,
            Op::Join => Command::Join { context: req.id },
            Op::Listen => Command::Listen {
                port: port(req.port)?,
            },
            Op::Accept => Command::Accept { listener: req.id },
            Op::Connect => {
                if req.family != 4 && req.family != 6 {
                    return Err(libc::EAFNOSUPPORT);
                }
                Command::Connect {
                    remote: SocketAddr::new(ip_of(req.family, req.addr), port(req.port)?),
                    local_port: (req.local_port != 0).then_some(req.local_port),
                }
            }
            Op::Close => {
                let slot = req.id as usize;
                if slot >= SLOTS {
                    return Err(libc::EBADF);
                }
                Command::Close { slot }
            }
            Op::Unlisten => Command::Unlisten { listener: req.id },
        })
    }

    /// The request that says this.
    pub fn request(&self) -> Request {
        let op = |op: Op| Request {
            op: op.code(),
            ..Request::default()
        };
        match *self {
            Command::Hello => op(Op::Hello),
            Command::Join { context } => Request {
                id: context,
                ..op(Op::Join)
            },
            Command::Listen { port } => Request {
                port,
                ..op(Op::Listen)
            },
            Command::Accept { listener } => Request {
                id: listener,
                ..op(Op::Accept)
            },
            Command::Connect { remote, local_port } => Request {
                port: remote.port(),
                family: if remote.is_ipv4() { 4 } else { 6 },
                addr: addr_bytes(remote.ip()),
                local_port: local_port.unwrap_or(0),
                ..op(Op::Connect)
            },
            Command::Close { slot } => Request {
                id: slot as u32,
                ..op(Op::Close)
            },
            Command::Unlisten { listener } => Request {
                id: listener,
                ..op(Op::Unlisten)
            },
        }
    }
}

/// `struct toe_req` from its bytes; None unless there are exactly that many.
pub fn request_of(bytes: &[u8]) -> Option<Request> {
    if bytes.len() != size_of::<Request>() {
        return None;
    }
    let u16_at = |i: usize| u16::from_ne_bytes([bytes[i], bytes[i + 1]]);
    let u32_at =
        |i: usize| u32::from_ne_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let mut addr = [0u8; 16];
    addr.copy_from_slice(&bytes[12..28]);
    Some(Request {
        op: u32_at(0),
        id: u32_at(4),
        port: u16_at(8),
        family: u16_at(10),
        addr,
        local_port: u16_at(28),
        pad: u16_at(30),
    })
}

/// `struct toe_req`'s bytes (the inverse of [`request_of`]).
pub fn request_bytes(r: &Request) -> Vec<u8> {
    let mut b = Vec::with_capacity(size_of::<Request>());
    b.extend_from_slice(&r.op.to_ne_bytes());
    b.extend_from_slice(&r.id.to_ne_bytes());
    b.extend_from_slice(&r.port.to_ne_bytes());
    b.extend_from_slice(&r.family.to_ne_bytes());
    b.extend_from_slice(&r.addr);
    b.extend_from_slice(&r.local_port.to_ne_bytes());
    b.extend_from_slice(&r.pad.to_ne_bytes());
    b
}

// The byte offsets above are the header's.
const _: () = {
    use std::mem::offset_of;
    assert!(offset_of!(Request, op) == 0);
    assert!(offset_of!(Request, id) == 4);
    assert!(offset_of!(Request, port) == 8);
    assert!(offset_of!(Request, family) == 10);
    assert!(offset_of!(Request, addr) == 12);
    assert!(offset_of!(Request, local_port) == 28);
    assert!(offset_of!(Request, pad) == 30);
    assert!(size_of::<Request>() == 32);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip_through_their_bytes() {
        let cases = [
            Command::Hello,
            Command::Join { context: 3 },
            Command::Listen { port: 8080 },
            Command::Accept { listener: 2 },
            Command::Connect {
                remote: "10.1.2.3:5201".parse().unwrap(),
                local_port: None,
            },
            Command::Connect {
                remote: "[2001:db8::7]:80".parse().unwrap(),
                local_port: Some(40123),
            },
            Command::Close { slot: SLOTS - 1 },
            Command::Unlisten { listener: 0 },
        ];
        for c in cases {
            assert_eq!(Command::parse(&request_bytes(&c.request())), Ok(c));
        }
    }

    #[test]
    fn malformed_requests_get_the_errno_their_reply_carries() {
        let ok = request_bytes(&Command::Listen { port: 1 }.request());
        assert_eq!(Command::parse(&ok[..31]), Err(libc::EPROTO));
        assert_eq!(
            Command::parse(&[ok.clone(), vec![0]].concat()),
            Err(libc::EPROTO)
        );
        let mut r = Command::Hello.request();
        r.op = 99;
        assert_eq!(Command::of(&r), Err(libc::EPROTO));
        assert_eq!(
            Command::of(&Command::Listen { port: 1 }.request().with_port(0)),
            Err(libc::EINVAL)
        );
        let mut c = Command::Connect {
            remote: "10.1.2.3:1".parse().unwrap(),
            local_port: None,
        }
        .request();
        c.family = 5;
        assert_eq!(Command::of(&c), Err(libc::EAFNOSUPPORT));
        let mut close = Command::Close { slot: 0 }.request();
        close.id = SLOTS as u32;
        assert_eq!(Command::of(&close), Err(libc::EBADF));
    }

    /// The fuzz target's seeds are requests as the shim sends them: every
    /// record parses, except in the seed of malformed ones, where none does.
    #[test]
    fn fuzz_seeds_are_the_shims_requests() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/toe_control");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let malformed = path.ends_with("malformed");
            let mut rest = &data[..];
            while let Some((&len, tail)) = rest.split_first() {
                let (msg, next) = tail.split_at(len as usize);
                rest = next;
                let parsed = Command::parse(msg);
                assert_eq!(parsed.is_err(), malformed, "{}: {parsed:?}", path.display());
                seen += 1;
            }
        }
        assert!(seen >= 20, "{seen} seed records");
    }

    impl Request {
        fn with_port(mut self, port: u16) -> Request {
            self.port = port;
            self
        }
    }
}

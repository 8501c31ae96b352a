//! The probe's scenarios (run in the child process). Raw libc calls, so the
//! connect() the shim sees is exactly the one described.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is valid.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough.
            let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as _;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above.
            let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as _;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn local_port(fd: i32) -> u16 {
    // SAFETY: getsockname writes at most `len` bytes into `ss`.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    unsafe { libc::getsockname(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) };
    // SAFETY: sin_port and sin6_port share the offset.
    let sin = unsafe { &*(&ss as *const _ as *const libc::sockaddr_in) };
    u16::from_be(sin.sin_port)
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn raw_connect(fd: i32, addr: SocketAddr) -> (i32, i32) {
    let (ss, len) = sockaddr(addr);
    // Set errno to a marker: a successful connect must leave it untouched.
    // SAFETY: __errno_location points at this thread's errno.
    unsafe { *libc::__errno_location() = 4242 };
    // SAFETY: a valid sockaddr of `len` bytes.
    let r = unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) };
    (r, errno())
}

fn socket(family: i32, ty: i32) -> i32 {
    // SAFETY: plain syscall.
    unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, 0) }
}

fn family(addr: SocketAddr) -> i32 {
    if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    }
}

/// A plain connect of a new socket of type `ty` to `t`, and where it stands.
fn connect_json(t: SocketAddr, ty: i32) -> serde_json::Value {
    let fd = socket(family(t), ty);
    let (r, e) = raw_connect(fd, t);
    serde_json::json!({"r": r, "errno": e, "local_port": local_port(fd)})
}

/// Waits (up to 30 s) for the parent to create `path`.
fn wait_for_file(path: &str) {
    let end = Instant::now() + Duration::from_secs(30);
    while !std::path::Path::new(path).exists() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs one scenario and returns its result.
pub fn run(scenario: &str, args: &[String]) -> serde_json::Value {
    use serde_json::json;
    let target: Option<SocketAddr> = args.first().and_then(|a| a.parse().ok());
    match scenario {
        "connect" => connect_json(target.unwrap(), libc::SOCK_STREAM),
        "bound" => {
            let t = target.unwrap();
            let fd = socket(family(t), libc::SOCK_STREAM);
            let any: SocketAddr = if t.is_ipv4() {
                "0.0.0.0:0".parse().unwrap()
            } else {
                "[::]:0".parse().unwrap()
            };
            let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
            let (ss, len) = sockaddr(SocketAddr::new(any.ip(), port));
            // SAFETY: valid sockaddr.
            let b = unsafe { libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) };
            let before = local_port(fd);
            let (r, e) = raw_connect(fd, t);
            json!({"bind": b, "before": before, "r": r, "errno": e, "local_port": local_port(fd)})
        }
        "udp" => connect_json(target.unwrap(), libc::SOCK_DGRAM),
        "nonblock" => {
            let t = target.unwrap();
            let fd = socket(family(t), libc::SOCK_STREAM | libc::SOCK_NONBLOCK);
            let (r, e) = raw_connect(fd, t);
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLOUT,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, 2000) };
            let mut err = 0i32;
            let mut len = 4 as libc::socklen_t;
            // SAFETY: writes one int.
            unsafe {
                libc::getsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_ERROR,
                    &mut err as *mut _ as *mut libc::c_void,
                    &mut len,
                )
            };
            json!({"r": r, "errno": e, "so_error": err, "local_port": local_port(fd)})
        }
        "mapped" => {
            let t = target.unwrap();
            let SocketAddr::V4(v4) = t else { panic!() };
            let mapped = SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port());
            let fd = socket(libc::AF_INET6, libc::SOCK_STREAM);
            let (r, e) = raw_connect(fd, mapped);
            json!({"r": r, "errno": e, "local_port": local_port(fd)})
        }
        "unix" => {
            let fd = socket(libc::AF_UNIX, libc::SOCK_STREAM);
            // SAFETY: zeroed sockaddr_un is valid.
            let mut sun: libc::sockaddr_un = unsafe { std::mem::zeroed() };
            sun.sun_family = libc::AF_UNIX as _;
            for (d, s) in sun.sun_path.iter_mut().zip(b"/nonexistent/steer.sock") {
                *d = *s as libc::c_char;
            }
            // SAFETY: valid sockaddr_un.
            let r = unsafe {
                libc::connect(
                    fd,
                    &sun as *const _ as *const libc::sockaddr,
                    size_of::<libc::sockaddr_un>() as libc::socklen_t,
                )
            };
            json!({"r": r, "errno": errno()})
        }
        "stream" => {
            // Connect, then send for the given milliseconds.
            let t = target.unwrap();
            let ms: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
            let mut s = TcpStream::connect_timeout(&t, Duration::from_secs(3)).unwrap();
            let port = s.local_addr().unwrap().port();
            let buf = vec![0x5au8; 64 * 1024];
            let end = Instant::now() + Duration::from_millis(ms);
            let mut sent = 0u64;
            while Instant::now() < end {
                match s.write(&buf) {
                    Ok(n) => sent += n as u64,
                    Err(_) => break,
                }
            }
            json!({"local_port": port, "sent": sent})
        }
        "hold" => {
            // N connects, every socket kept open until the file args[2]
            // exists (so all of them are live at once), then the results.
            let t = target.unwrap();
            let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1);
            let results: Vec<_> = (0..n).map(|_| connect_json(t, libc::SOCK_STREAM)).collect();
            if let Some(flag) = args.get(2) {
                wait_for_file(flag);
            }
            json!({"connects": results})
        }
        "restart" => {
            // A connect, then `args[1]` is created and the probe waits for
            // `args[2]` (the allocator is restarted meanwhile), then two more.
            let t = target.unwrap();
            let first = connect_json(t, libc::SOCK_STREAM);
            std::fs::write(&args[1], b"").unwrap();
            wait_for_file(&args[2]);
            let after: Vec<_> = (0..2).map(|_| connect_json(t, libc::SOCK_STREAM)).collect();
            json!({"first": first, "after": after})
        }
        other => panic!("unknown probe scenario {other}"),
    }
}

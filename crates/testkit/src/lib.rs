//! Test plumbing shared by the integration tests of several crates (dev-only,
//! never published): root checks for the root-only tests, scratch
//! directories removed on drop, and a loopback port that refuses
//! connections.
//!
//! Only helpers that more than one crate's tests use live here; a helper of
//! one crate's tests stays in that crate's `tests/`.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// True as root; otherwise says `skipped: needs root ({what})` on stderr.
///
/// For the root-only tests (`#[ignore = "needs root ..."]`, run by
/// `make test` as root with `--include-ignored`): see [`need_root!`].
pub fn root(what: &str) -> bool {
    if is_root() {
        return true;
    }
    eprintln!("skipped: needs root ({what})");
    false
}

/// Returns from the test (after saying why) unless it runs as root:
/// `testkit::need_root!("network namespaces, XDP");`.
#[macro_export]
macro_rules! need_root {
    ($what:expr) => {
        if !$crate::root($what) {
            return;
        }
    };
}

/// A path under the system's temp dir that no other call in any test
/// process uses: `{tmp}/{prefix}-{pid}-{n}`. Not created.
pub fn unique_path(prefix: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()))
}

/// A fresh directory at a [`unique_path`], removed with its contents on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        let path = unique_path(prefix);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A 127.0.0.1 port where nothing listens, held for as long as this lives:
/// the port is bound but not listening, so a connect to it is refused, and
/// no connect can pick it as its own source port (a loopback connect to a
/// merely free port may pick that very port and connect to itself).
pub struct RefusingPort {
    _socket: socket2::Socket,
    addr: SocketAddr,
}

impl RefusingPort {
    pub fn new() -> RefusingPort {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let any = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        socket.bind(&any.into()).unwrap();
        let addr = socket.local_addr().unwrap().as_socket().unwrap();
        RefusingPort {
            _socket: socket,
            addr,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Default for RefusingPort {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether a connect to `addr` (an IPv4 loopback address) is refused, i.e.
/// nothing listens there. The probe connects from 127.0.0.2, so it can
/// never be the loopback self-connect a connect from `addr`'s own address
/// may become (TCP simultaneous open to a port that just closed). Binding
/// the port again is no test either: connections the listener accepted may
/// hold it in FIN-WAIT for a while.
pub fn nothing_listens(addr: SocketAddr) -> bool {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let from = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), 0));
    socket.bind(&from.into()).unwrap();
    match socket.connect_timeout(&addr.into(), std::time::Duration::from_secs(5)) {
        Ok(()) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionRefused,
    }
}

/// A 127.0.0.1 port that was free when asked (nothing holds it after): for
/// a test that binds it itself, e.g. as a chosen source port. To connect
/// somewhere nothing answers, use [`RefusingPort`] instead.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Where the shared public packet captures are: `$STEER_TRACES`, else
/// `../shared/traces` next to the repository. They are not in the
/// repository (not ours to relicense, docs/bench.md).
pub fn shared_traces_dir() -> PathBuf {
    std::env::var_os("STEER_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"))
}

/// One of the shared captures. A test that needs it fails when it is
/// missing, rather than pass without running.
pub fn shared_trace(name: &str) -> PathBuf {
    let path = shared_traces_dir().join(name);
    assert!(
        path.is_file(),
        "this test needs the shared packet trace {}: put the shared traces \
         (shared/traces/SOURCES.md) there or set STEER_TRACES to their directory",
        path.display()
    );
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusing_port_refuses() {
        let p = RefusingPort::new();
        let err = std::net::TcpStream::connect(p.addr()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    }

    #[test]
    fn temp_dirs_are_distinct_and_removed() {
        let (a, b) = (TempDir::new("testkit"), TempDir::new("testkit"));
        assert_ne!(a.path(), b.path());
        assert!(a.path().is_dir());
        std::fs::write(a.join("f"), "x").unwrap();
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists());
    }
}

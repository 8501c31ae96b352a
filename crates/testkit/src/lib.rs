//! Test plumbing shared by the integration tests of several crates (dev-only,
//! never published): prerequisite checks, the shared packet captures,
//! scratch directories removed on drop, a loopback port that refuses
//! connections, and TCP frames to put in crafted captures.
//!
//! Only helpers that more than one crate's tests use live here; a helper of
//! one crate's tests stays in that crate's `tests/`.
//!
//! # A test that cannot run fails
//!
//! A test that needs something the code cannot provide (root, a program, a
//! device, the packet captures) says so with [`require`] (or
//! [`require_root`], [`shared_trace`]): when it is missing the test fails
//! with one line, `missing prerequisite: WHAT`. It never returns early and
//! passes. A test whose prerequisite an ordinary developer machine lacks
//! (root, headless Chromium) is also marked `#[ignore = "needs ..."]`, so a
//! plain `cargo test` does not run it and reports it as ignored, with that
//! reason.
//!
//! Strict mode (see [`strict`]): under CI (the variable `CI` is set) or
//! under `make test`, which exports `STEER_STRICT_TESTS=1` to its test runs,
//! nothing may be left out: the tests run with `--include-ignored`, so every
//! missing prerequisite is a failure. Every test binary that has ignored
//! tests declares [`strict_mode_guard!`] once: its
//! `strict_mode_runs_the_ignored_tests` test fails a strict run that left
//! them out, so `CI=1 cargo test -p nic` fails as `make test` would, and a
//! test of this crate fails when a binary with ignored tests lacks it.

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The variable `make test` sets (to `1`) for its test runs: see [`strict`].
pub const STRICT_VAR: &str = "STEER_STRICT_TESTS";

/// Whether the tests run in strict mode: under CI (`CI` set, as CI services
/// do) or under `make test` ([`STRICT_VAR`] set). An empty value, `0` or
/// `false` counts as unset.
pub fn strict() -> bool {
    strict_in(std::env::var_os("CI"), std::env::var_os(STRICT_VAR))
}

fn strict_in(ci: Option<OsString>, strict_var: Option<OsString>) -> bool {
    let set = |v: Option<OsString>| v.is_some_and(|v| !(v.is_empty() || v == "0" || v == "false"));
    set(ci) || set(strict_var)
}

/// Declares the test `strict_mode_runs_the_ignored_tests` in the test
/// binary it is written in: in strict mode ([`strict`]) it fails unless the
/// binary was asked to run its ignored tests (`--include-ignored` or
/// `--ignored`). Every test binary with an `#[ignore]` test (an
/// integration test file, or a crate's unit tests) writes
/// `testkit::strict_mode_guard!();` once, at the top level of the file (of
/// `lib.rs` under `#[cfg(test)]` for unit tests).
///
/// Why in each binary: only a test binary sees the arguments it was run
/// with, and any binary can be run alone (`cargo test -p X`); a check in the
/// Makefile would only cover `make test`. A run filtered by name leaves the
/// guard out with the rest, as it chose to.
#[macro_export]
macro_rules! strict_mode_guard {
    () => {
        /// Strict mode (CI, `make test`) runs this binary's ignored
        /// (root-only) tests: without `--include-ignored` they would be
        /// reported as ignored and the run would pass without them.
        #[test]
        fn strict_mode_runs_the_ignored_tests() {
            $crate::check_strict_runs_ignored($crate::strict(), std::env::args());
        }
    };
}

/// What [`strict_mode_guard!`]'s test checks: fails (one line) when
/// `strict` and the test binary's `args` leave the ignored tests out.
#[track_caller]
pub fn check_strict_runs_ignored(strict: bool, args: impl IntoIterator<Item = String>) {
    let args: Vec<String> = args.into_iter().collect();
    let includes_ignored = args
        .iter()
        .any(|a| a == "--include-ignored" || a == "--ignored");
    assert!(
        !strict || includes_ignored,
        "strict mode (CI or {STRICT_VAR} set) runs the tests with --include-ignored; these args \
         leave the ignored tests out: {args:?}"
    );
}

/// Fails the calling test, with the one line `missing prerequisite: {what}`,
/// unless `available`. `what` names the thing and, where it helps, how to
/// get it: `testkit::require("iperf3 (make deps installs it)", found)`.
#[track_caller]
pub fn require(what: &str, available: bool) {
    if !available {
        missing(what);
    }
}

/// Fails the calling test with the one line `missing prerequisite: {what}`:
/// for a prerequisite found missing by an error, e.g.
/// `.unwrap_or_else(|e| testkit::missing(&format!("network namespaces ({e})")))`.
#[track_caller]
pub fn missing(what: &str) -> ! {
    panic!("missing prerequisite: {what}");
}

/// Whether this process runs as root (effective uid 0): [`host::is_root`].
pub fn is_root() -> bool {
    host::is_root()
}

/// Fails the calling test unless it runs as root: [`require`] with
/// `root ({what})`. For the root-only tests, marked
/// `#[ignore = "needs root ..."]` and run by `make test` as root with
/// `--include-ignored`.
#[track_caller]
pub fn require_root(what: &str) {
    require(
        &format!("root ({what}): run the tests as root, as `make test` does"),
        is_root(),
    );
}

/// The path of `program` on `$PATH`; fails the test (one line, with `how`
/// to get it) when there is none: `testkit::require_program("iperf3", "make deps installs it")`.
#[track_caller]
pub fn require_program(program: &str, how: &str) -> PathBuf {
    host::command::find_program(program)
        .unwrap_or_else(|| missing(&format!("the program {program} ({how})")))
}

/// A path under the system's temp dir that no other call in any test
/// process uses: `{tmp}/{prefix}-{pid}-{n}`. Not created.
pub fn unique_path(prefix: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()))
}

/// A network namespace that no other test uses (`{tag}-{pid}-{n}`),
/// deleted on drop. Failing to make one is a missing prerequisite.
#[derive(Debug)]
pub struct Netns(String);

impl Netns {
    pub fn new(tag: &str) -> Netns {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let name = format!("{tag}-{}-{n}", std::process::id());
        host::netns::add(&name).unwrap_or_else(|e| missing(&format!("network namespaces ({e})")));
        Netns(name)
    }

    pub fn name(&self) -> &str {
        &self.0
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = host::netns::delete(&self.0);
    }
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

/// The workspace's root directory (two levels above a crate's manifest).
pub fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// Where the shared public packet captures (docs/traces.md) are looked
/// for, in order: `$STEER_TRACES` alone when it is set (and not empty);
/// else `traces/` in the workspace, then `../shared/traces` next to it.
/// They are not in the repository: they are not ours to relicense.
pub fn traces_search_path() -> Vec<PathBuf> {
    traces_search_path_in(std::env::var_os("STEER_TRACES"), &workspace_root())
}

fn traces_search_path_in(steer_traces: Option<OsString>, root: &Path) -> Vec<PathBuf> {
    match steer_traces {
        Some(dir) if !dir.is_empty() => vec![PathBuf::from(dir)],
        _ => vec![root.join("traces"), root.join("../shared/traces")],
    }
}

/// One of the shared captures, from the first directory of
/// [`traces_search_path`] that holds it. A test that needs it fails with one
/// line when none does, rather than pass without running.
#[track_caller]
pub fn shared_trace(name: &str) -> PathBuf {
    let dirs = traces_search_path();
    let found = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file());
    found.unwrap_or_else(|| {
        let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        missing(&format!(
            "the packet capture {name} (looked in {}): docs/traces.md says where to \
             get it; put it in traces/ or set STEER_TRACES to its directory",
            looked.join(", ")
        ))
    })
}

/// An Ethernet + IPv4 + TCP frame (etherparse's builder, checksums filled)
/// with `payload` zero bytes; `flags` are the TCP control bits as in byte 13
/// of the header (RFC 9293 section 3.1).
pub fn tcp_frame(
    src: Ipv4Addr,
    sport: u16,
    dst: Ipv4Addr,
    dport: u16,
    seq: u32,
    flags: u8,
    payload: usize,
) -> Vec<u8> {
    let mut b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(src.octets(), dst.octets(), 64)
        .tcp(sport, dport, seq, 65535);
    // The control bits, low to high: FIN SYN RST PSH ACK URG ECE CWR.
    if flags & 0x01 != 0 {
        b = b.fin();
    }
    if flags & 0x02 != 0 {
        b = b.syn();
    }
    if flags & 0x04 != 0 {
        b = b.rst();
    }
    if flags & 0x08 != 0 {
        b = b.psh();
    }
    if flags & 0x10 != 0 {
        b = b.ack(0);
    }
    if flags & 0x20 != 0 {
        b = b.urg(0);
    }
    if flags & 0x40 != 0 {
        b = b.ece();
    }
    if flags & 0x80 != 0 {
        b = b.cwr();
    }
    let data = vec![0u8; payload];
    let mut out = Vec::with_capacity(b.size(payload));
    b.write(&mut out, &data)
        .expect("a TCP segment that fits an IPv4 packet is always written");
    out
}

/// A child of process `parent` (running `comm`, if given), once there is
/// one; panics after 60 s.
pub fn child_of(parent: u32, comm: Option<&str>) -> u32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        assert!(
            Path::new(&format!("/proc/{parent}")).exists(),
            "process {parent} is gone"
        );
        let named = children(parent).into_iter().find(|pid| {
            comm.is_none_or(|comm| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|name| name.trim() == comm)
            })
        });
        if let Some(pid) = named {
            return pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("process {parent} started no child {}", comm.unwrap_or(""));
}

/// The children of process `parent` now, in pid order
/// ([`host::command::children`]).
pub fn children(parent: u32) -> Vec<u32> {
    host::command::children(parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    // This binary has no ignored test; the guard runs here as in every
    // binary that has.
    strict_mode_guard!();

    #[test]
    fn the_guard_fails_a_strict_run_that_leaves_ignored_tests_out() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        check_strict_runs_ignored(false, args(&["t"]));
        check_strict_runs_ignored(true, args(&["t", "--include-ignored"]));
        check_strict_runs_ignored(true, args(&["t", "--ignored"]));
        let err = std::panic::catch_unwind(|| check_strict_runs_ignored(true, args(&["t"])))
            .expect_err("a strict run without the ignored tests fails");
        let msg = err.downcast_ref::<String>().expect("a formatted message");
        assert!(
            msg.starts_with("strict mode (CI or STEER_STRICT_TESTS set)"),
            "{msg}"
        );
    }

    /// Every test binary with an ignored test has the guard. Before, only
    /// this crate's tests had it: `CI=1 cargo test -p nic` passed with
    /// nic's root-only tests left out.
    #[test]
    fn every_test_binary_with_ignored_tests_has_the_strict_guard() {
        let crates = workspace_root().join("crates");
        let mut binaries = 0;
        let mut unguarded = Vec::new();
        for krate in std::fs::read_dir(&crates).unwrap().flatten() {
            for binary in test_binaries(&krate.path()) {
                let ignores = binary.files.iter().any(|f| has_ignored_test(f));
                let guarded = binary.files.iter().any(|f| {
                    std::fs::read_to_string(f).is_ok_and(|t| t.contains("strict_mode_guard!()"))
                });
                binaries += usize::from(ignores);
                if ignores && !guarded {
                    unguarded.push(binary.name);
                }
            }
        }
        assert!(
            binaries >= 20,
            "found only {binaries} test binaries with ignored tests"
        );
        assert!(
            unguarded.is_empty(),
            "test binaries with #[ignore] tests but no testkit::strict_mode_guard!(): {unguarded:?}"
        );
    }

    /// One test binary of a crate and the source files it is built from.
    struct TestBinary {
        name: String,
        files: Vec<PathBuf>,
    }

    /// A crate's test binaries: its unit tests (every file under `src/`)
    /// and each integration test (`tests/NAME.rs`, or `tests/NAME/` with
    /// its modules). A module the integration tests share
    /// (`tests/common/`) belongs to each binary that declares it.
    fn test_binaries(krate: &Path) -> Vec<TestBinary> {
        let name = |p: &Path| {
            p.strip_prefix(workspace_root())
                .unwrap_or(p)
                .display()
                .to_string()
        };
        let mut out = vec![TestBinary {
            name: name(&krate.join("src")),
            files: rust_files(&krate.join("src")),
        }];
        let tests = krate.join("tests");
        let shared: Vec<PathBuf> = ["common"]
            .iter()
            .flat_map(|m| rust_files(&tests.join(m)))
            .collect();
        for entry in std::fs::read_dir(&tests).into_iter().flatten().flatten() {
            let path = entry.path();
            let mut files = if path.extension().is_some_and(|e| e == "rs") {
                vec![path.clone()]
            } else if path.is_dir() && path.file_name().is_some_and(|n| n != "common") {
                rust_files(&path)
            } else {
                continue;
            };
            let declares_common = files.iter().any(|f| {
                std::fs::read_to_string(f)
                    .is_ok_and(|t| t.lines().any(|l| l.trim() == "mod common;"))
            });
            if declares_common {
                files.extend(shared.iter().cloned());
            }
            out.push(TestBinary {
                name: name(&path),
                files,
            });
        }
        out
    }

    /// Every `.rs` file under `dir`.
    fn rust_files(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(rust_files(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
        out
    }

    /// Whether `file` marks a test `#[ignore]` (an attribute line, not a
    /// comment that names one).
    fn has_ignored_test(file: &Path) -> bool {
        std::fs::read_to_string(file)
            .is_ok_and(|t| t.lines().any(|l| l.trim_start().starts_with("#[ignore")))
    }

    #[test]
    fn strict_mode_is_ci_or_the_make_test_variable() {
        let v = |s: &str| Some(OsString::from(s));
        assert!(!strict_in(None, None));
        assert!(strict_in(v("true"), None));
        assert!(strict_in(None, v("1")));
        assert!(!strict_in(v(""), v("0")));
        assert!(!strict_in(v("false"), None));
    }

    #[test]
    fn require_fails_with_one_line_naming_what_is_missing() {
        require("nothing", true);
        let err = std::panic::catch_unwind(|| require("the program nosuch (apt)", false))
            .expect_err("a missing prerequisite fails");
        let msg = err.downcast_ref::<String>().expect("a formatted message");
        assert_eq!(msg, "missing prerequisite: the program nosuch (apt)");
        assert!(
            std::panic::catch_unwind(|| require_program("steer-no-such-program", "none")).is_err()
        );
        assert!(require_program("sh", "coreutils").is_absolute());
    }

    #[test]
    fn traces_come_from_steer_traces_alone_when_set() {
        let root = Path::new("/ws");
        assert_eq!(
            traces_search_path_in(Some("/t".into()), root),
            vec![PathBuf::from("/t")]
        );
        let default = vec![root.join("traces"), root.join("../shared/traces")];
        assert_eq!(traces_search_path_in(None, root), default);
        assert_eq!(traces_search_path_in(Some("".into()), root), default);
    }

    #[test]
    fn a_missing_trace_fails_naming_where_it_looked() {
        let err = std::panic::catch_unwind(|| shared_trace("steer-no-such-capture.pcap"))
            .expect_err("a missing capture fails");
        let msg = err.downcast_ref::<String>().expect("a formatted message");
        assert!(
            msg.starts_with(
                "missing prerequisite: the packet capture steer-no-such-capture.pcap (looked in "
            ) && msg.contains("docs/traces.md")
                && !msg.contains('\n'),
            "{msg}"
        );
    }

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

    #[test]
    fn tcp_frame_is_what_it_says() {
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let f = tcp_frame(a, 1, b, 2, 7, 0x02 | 0x10, 5);
        assert_eq!(f.len(), 14 + 20 + 20 + 5);
        let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
        let Some(etherparse::TransportSlice::Tcp(t)) = p.transport else {
            panic!("not TCP: {p:?}");
        };
        assert_eq!((t.source_port(), t.destination_port()), (1, 2));
        assert_eq!(t.sequence_number(), 7);
        assert!(t.syn() && t.ack() && !t.fin() && !t.psh());
        assert_eq!(t.payload().len(), 5);
    }
}

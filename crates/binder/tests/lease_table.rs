//! The LD_PRELOAD binder with Steer's real allocator and its shared-memory
//! lease table (docs/binders.md, "Lease table"): many processes connecting
//! at once claim planned ports without a round trip, no port is handed out
//! twice, the flows stay balanced over the receiver's CPUs, and an
//! allocator that stops or restarts never makes a connect fail. No root.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{listener, probe_command, probe_result};
use srap::alloc::{Server, ServerHandle, ServerOptions};
use testkit::TempDir;

/// The child side: runs when re-executed with BINDER_PROBE set.
#[test]
fn probe() {
    common::probe_child();
}

const QUEUES: u32 = 4;

fn config() -> rss::RssConfig {
    rss::RssConfig::ethtool_default(rss::RssKey::microsoft(), QUEUES, 128).unwrap()
}

/// Steer's allocator on `socket`, with the receiver config for 127.0.0.1.
fn allocator(socket: &Path) -> ServerHandle {
    let server = Server::bind(ServerOptions::new(socket)).unwrap();
    server
        .allocator()
        .set_config(IpAddr::from([127, 0, 0, 1]), config())
        .unwrap();
    server.spawn()
}

fn shim(dir: &TempDir) -> PathBuf {
    binder::preload::install_shim_in(dir.path()).unwrap()
}

/// A probe under the shim, one port per lease (no spares: every connect
/// is a lone one), with its decisions logged to stderr.
fn shimmed(shim: &Path, socket: &Path, scenario: &str, args: &[String]) -> Command {
    let mut cmd = probe_command(scenario, args);
    binder::preload::configure(&mut cmd, shim, Some(socket));
    cmd.env(binder::preload::DEBUG_ENV, "1")
        .env(binder::preload::BATCH_ENV, "1");
    cmd
}

fn output(cmd: &mut Command) -> (serde_json::Value, String) {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (probe_result(&out), stderr)
}

fn port_of(connect: &serde_json::Value) -> u16 {
    assert_eq!(connect["r"], 0, "connect failed: {connect}");
    connect["local_port"].as_u64().unwrap() as u16
}

#[test]
fn concurrent_processes_never_share_a_port_and_stay_balanced() {
    const PROCESSES: usize = 12;
    const EACH: usize = 4;
    let dir = TempDir::new("binder-lt");
    let socket = dir.join("alloc.sock");
    let server = allocator(&socket);
    assert!(
        srap::alloc::table::table_path(&socket).exists(),
        "the allocator makes its lease table next to its socket"
    );
    let shim = shim(&dir);
    let target = listener("127.0.0.1:0");
    // The first connect to this destination is a round trip; it makes the
    // allocator plan a region for it.
    let (first, _) = output(&mut shimmed(
        &shim,
        &socket,
        "connect",
        &[target.to_string()],
    ));
    let mut ports = vec![port_of(&first)];

    let go = dir.join("go");
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            let args = [
                target.to_string(),
                EACH.to_string(),
                go.display().to_string(),
            ];
            shimmed(&shim, &socket, "hold", &args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Every child holds its sockets until all have connected (each
    // connect is a lease by then: a round trip's at once, a claim's as soon
    // as the allocator's table thread wakes).
    let want = 1 + PROCESSES * EACH;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while server.allocator().status().leases.len() < want && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let status = server.allocator().status();
    std::fs::write(&go, b"").unwrap();

    let mut stderr = String::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        stderr.push_str(&String::from_utf8_lossy(&out.stderr));
        let r = probe_result(&out);
        for c in r["connects"].as_array().unwrap() {
            ports.push(port_of(c));
        }
    }
    assert_eq!(ports.len(), want);
    // A port handed to two processes for this destination would make the
    // second connect find its 4-tuple taken and fall back.
    assert!(
        !stderr.contains("pinned port unavailable"),
        "a port was handed out twice:\n{stderr}"
    );
    let distinct: HashSet<u16> = ports.iter().copied().collect();
    assert_eq!(distinct.len(), ports.len(), "{ports:?}");
    // Every connect was steered (a lease for its port), most of them from
    // the table without a round trip.
    let leased: BTreeMap<u16, u32> = status
        .leases
        .iter()
        .map(|l| (l.flow.port, l.flow.cpu))
        .collect();
    assert_eq!(
        leased.len(),
        status.leases.len(),
        "two live leases of one port: {:?}",
        status.leases
    );
    for p in &ports {
        assert!(
            leased.contains_key(p),
            "port {p} not leased: {:?}",
            status.leases
        );
    }
    let claims = stderr.matches("lease table: port").count();
    let stats = server.allocator().table_stats().unwrap();
    assert!(
        claims > 0 && stats.claims >= claims as u64,
        "the table served no connect ({claims} claims logged, {stats:?})\n{stderr}"
    );
    // Balanced over the receiver's CPUs as the plan places them.
    let cfg = config();
    let mut per_cpu: BTreeMap<u32, usize> = BTreeMap::new();
    for &p in &ports {
        let flow = rss::FlowTuple::new(
            target.ip(),
            p,
            target.ip(),
            target.port(),
            rss::L4Proto::Tcp,
        );
        *per_cpu.entry(cfg.place(&flow).unwrap().cpu).or_default() += 1;
    }
    assert_eq!(per_cpu.len(), QUEUES as usize, "flows per CPU: {per_cpu:?}");
    let (min, max) = (
        per_cpu.values().min().copied().expect("a CPU with flows"),
        per_cpu.values().max().copied().expect("a CPU with flows"),
    );
    assert!(max - min <= 1, "flows per CPU: {per_cpu:?}");
}

#[test]
fn allocator_restart_never_fails_a_connect_or_reuses_a_stale_table() {
    let dir = TempDir::new("binder-lt-restart");
    let socket = dir.join("alloc.sock");
    let shim = shim(&dir);
    let target = listener("127.0.0.1:0");
    let first = allocator(&socket);
    // A region for the target in the first allocator's table.
    let (r, _) = output(&mut shimmed(
        &shim,
        &socket,
        "connect",
        &[target.to_string()],
    ));
    port_of(&r);

    let (stopped, restarted) = (dir.join("stopped"), dir.join("restarted"));
    let child = shimmed(
        &shim,
        &socket,
        "restart",
        &[
            target.to_string(),
            stopped.display().to_string(),
            restarted.display().to_string(),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !stopped.exists() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // The child has mapped the first table; the allocator goes away (its
    // table is retired and removed) and a new one starts on the same path.
    drop(first);
    assert!(!srap::alloc::table::table_path(&socket).exists());
    let second = allocator(&socket);
    std::fs::write(&restarted, b"").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r = probe_result(&out);
    port_of(&r["first"]);
    let leased: HashSet<u16> = second
        .allocator()
        .status()
        .leases
        .iter()
        .map(|l| l.flow.port)
        .collect();
    for c in r["after"].as_array().unwrap() {
        let port = port_of(c);
        assert!(
            leased.contains(&port),
            "port {port} after the restart is not the new allocator's: {leased:?}\n{stderr}"
        );
    }
    assert!(!stderr.contains("pinned port unavailable"), "{stderr}");

    // Without any allocator, a connect is a plain one.
    drop(second);
    let (r, stderr) = output(&mut shimmed(
        &shim,
        &socket,
        "connect",
        &[target.to_string()],
    ));
    port_of(&r);
    assert!(!stderr.contains("lease table: port"), "{stderr}");
}

/// The table's constants are what the running allocator wrote: a shim
/// built from the header reads this file (checked at compile time for the
/// numbers; here for a real file).
#[test]
fn table_file_has_the_header_layout() {
    use srap::alloc::table as lt;
    let dir = TempDir::new("binder-lt-file");
    let socket = dir.join("alloc.sock");
    let _server = allocator(&socket);
    let bytes = std::fs::read(lt::table_path(&socket)).unwrap();
    assert_eq!(bytes.len(), lt::LT_FILE_SIZE);
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    assert_eq!(u32_at(0), lt::LT_MAGIC);
    assert_eq!(u32_at(4), lt::LT_VERSION);
    assert_eq!(u32_at(8) as usize, lt::LT_REGIONS);
    assert_eq!(u32_at(12) as usize, lt::LT_SLOTS);
    let beat = u64::from_le_bytes(bytes[16..24].try_into().unwrap());
    let now = lt::monotonic_ms();
    assert!(beat != 0 && now >= beat, "heartbeat {beat}, now {now}");
}

/// A table file written by hand next to the test allocator's socket: one
/// region for 127.0.0.1 -> `target`, slot 0 FREE with `port`.
fn forge_table(socket: &Path, target: std::net::SocketAddr, port: u16, magic: u32, beat: u64) {
    use srap::alloc::table as lt;
    let mut b = vec![0u8; lt::LT_FILE_SIZE];
    b[0..4].copy_from_slice(&magic.to_le_bytes());
    b[4..8].copy_from_slice(&lt::LT_VERSION.to_le_bytes());
    b[8..12].copy_from_slice(&(lt::LT_REGIONS as u32).to_le_bytes());
    b[12..16].copy_from_slice(&(lt::LT_SLOTS as u32).to_le_bytes());
    b[16..24].copy_from_slice(&beat.to_le_bytes());
    let key = lt::LT_HEADER_SIZE;
    b[key + 8] = lt::LT_FAMILY_V4;
    b[key + 9] = lt::LT_PROTO_TCP;
    b[key + 10..key + 12].copy_from_slice(&target.port().to_le_bytes());
    b[key + 16..key + 20].copy_from_slice(&[127, 0, 0, 1]);
    b[key + 32..key + 36].copy_from_slice(&[127, 0, 0, 1]);
    let word = lt::LT_STATE_FREE | (u64::from(port) << lt::LT_PORT_SHIFT) | (7 << lt::LT_GEN_SHIFT);
    let slot = key + lt::LT_REGION_KEY_SIZE;
    b[slot..slot + 8].copy_from_slice(&word.to_le_bytes());
    std::fs::write(lt::table_path(socket), b).unwrap();
}

/// The shim's checks of the table, with a hand-made file: a fresh one is
/// used (the layout is the one the C reads); a stale or foreign one is
/// not (the round trip's port is used); a claimed port that turns out to
/// be taken falls back to a plain connect.
#[test]
fn forged_stale_or_foreign_tables_never_fail_a_connect() {
    use srap::alloc::table as lt;
    let table_port = testkit::free_port();
    // One port per round trip (a port reused for the same destination
    // would meet its last connection in TIME_WAIT).
    let socket_ports: Vec<u16> = (0..3).map(|_| testkit::free_port()).collect();
    let alloc = common::Allocator::start(common::Answer::Ports(socket_ports.clone()));
    let dir = TempDir::new("binder-lt-forged");
    let shim = shim(&dir);
    let target = listener("127.0.0.1:0");
    let connect = |what: &str| {
        let (r, stderr) = output(&mut shimmed(
            &shim,
            &alloc.path,
            "connect",
            &[target.to_string()],
        ));
        eprintln!("{what}: {stderr}");
        assert_eq!(r["r"], 0, "{what}: {r}");
        r["local_port"].as_u64().unwrap() as u16
    };
    forge_table(
        &alloc.path,
        target,
        table_port,
        lt::LT_MAGIC,
        lt::monotonic_ms(),
    );
    assert_eq!(connect("fresh"), table_port);
    forge_table(
        &alloc.path,
        target,
        table_port,
        lt::LT_MAGIC,
        lt::monotonic_ms().saturating_sub(5 * lt::LT_STALE_MS),
    );
    assert_eq!(connect("stale"), socket_ports[0]);
    forge_table(
        &alloc.path,
        target,
        table_port,
        0xdead_beef,
        lt::monotonic_ms(),
    );
    assert_eq!(connect("foreign magic"), socket_ports[1]);
    std::fs::write(lt::table_path(&alloc.path), b"short").unwrap();
    assert_eq!(connect("short file"), socket_ports[2]);
    // A port the table offers but a listener holds: the pin fails, the
    // connect goes on with a kernel port.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let held_port = held.local_addr().unwrap().port();
    forge_table(
        &alloc.path,
        target,
        held_port,
        lt::LT_MAGIC,
        lt::monotonic_ms(),
    );
    let port = connect("taken");
    assert!(port != held_port && port != 0);
}

//! Benchmark: what the LD_PRELOAD binder adds to one connect().
//!
//! The same client (this program, re-executed) connects N times to a
//! loopback listener, timing each connect() call, in three modes run
//! alternately in R rounds of one process each:
//!
//! - `plain`: no LD_PRELOAD;
//! - `preload`: the shim, with an allocator (a minimal in-process one that
//!   answers from a list of ports; the real allocator's own work is extra),
//!   spares on (batches of up to 16 for repeated connects);
//! - `preload-one-by-one`: the same with STEER_PRELOAD_BATCH=1, one
//!   allocator round trip per connect (the shim before spares);
//! - `preload-srap`: the shim with Steer's real allocator (srap), spares on;
//! - `preload-srap-one-by-one`: the real allocator, no spares: each
//!   connect claims a planned port from the allocator's shared-memory lease
//!   table (a round trip only when the table has none);
//! - `preload-srap-round-trip`: the same with the table turned off
//!   (STEER_PRELOAD_TABLE=0): one allocator round trip per connect;
//! - `preload-no-allocator`: the shim, nothing listening on the socket
//!   path (the fallback cost);
//! - `cgroup-bpf` (root): the client in a cgroup with the cgroup binder's
//!   connect4 program and 16 planned ports for the target (a map lookup and
//!   a bpf_bind() inside connect());
//! - `cgroup-bpf-no-plan` (root): the program attached, no plan for the
//!   target (one map lookup, then the kernel's port).
//!
//! Sockets are closed with SO_LINGER 0 (RST), so no TIME_WAIT piles up.
//! Prints median and p90 per mode and the median difference; with `--json`
//! the table goes to stderr and stdout gets one JSON object (the test
//! matrix's case `binder-connect` reads it): per mode the samples, median,
//! p90 and median added over plain (null when not measured), the lease
//! table's counters and the cgroup programs' counters (null without root).
//! The run fails (exit 1, after the JSON) when a cgroup mode did not do
//! what it is named for: every connect of `cgroup-bpf` must have bound a
//! planned port and every one of `cgroup-bpf-no-plan` found no plan, else
//! its times are of another path.
//!
//! cargo run --release -p binder --example preload_overhead -- [--json] [N] [R]

use std::io::{BufRead, BufReader, Write};

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::process::Command;
use std::time::Instant;

use binder::{CgroupBinder, TempCgroup};

fn client(target: SocketAddr, n: usize) {
    let SocketAddr::V4(t) = target else {
        panic!("IPv4 target")
    };
    // SAFETY: zeroed sockaddr_in is valid.
    let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sin.sin_family = libc::AF_INET as _;
    sin.sin_port = t.port().to_be();
    sin.sin_addr.s_addr = u32::from_ne_bytes(t.ip().octets());
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        // SAFETY: plain socket calls on an fd this loop owns.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            let t0 = Instant::now();
            let r = libc::connect(
                fd,
                &sin as *const _ as *const libc::sockaddr,
                size_of::<libc::sockaddr_in>() as u32,
            );
            samples.push(t0.elapsed().as_nanos() as u64);
            assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
            let lin = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                &lin as *const _ as *const libc::c_void,
                size_of::<libc::linger>() as u32,
            );
            libc::close(fd);
        }
    }
    let line: Vec<String> = samples.iter().map(u64::to_string).collect();
    println!("{}", line.join(" "));
}

fn allocator(path: &std::path::Path) {
    let l = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        let port = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(20000));
        for c in l.incoming().flatten() {
            let port = port.clone();
            // One thread per connection, one answer per request line.
            std::thread::spawn(move || {
                let mut w = c.try_clone().unwrap();
                for line in BufReader::new(c).lines() {
                    let Ok(line) = line else { return };
                    let next =
                        || 20000 + port.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 10000;
                    let count = serde_json::from_str::<serde_json::Value>(&line)
                        .ok()
                        .and_then(|v| v["count"].as_u64());
                    let answer = match count {
                        None => {
                            let p = next();
                            format!("{{\"v\":1,\"port\":{p},\"queue\":0,\"cpu\":0,\"lease\":{p}}}")
                        }
                        Some(n) => {
                            let leases: Vec<String> = (0..n)
                                .map(|_| {
                                    let p = next();
                                    format!("{{\"port\":{p},\"queue\":0,\"cpu\":0,\"lease\":{p}}}")
                                })
                                .collect();
                            format!("{{\"v\":1,\"leases\":[{}]}}", leases.join(","))
                        }
                    };
                    if writeln!(w, "{answer}").is_err() {
                        return;
                    }
                }
            });
        }
    });
}

/// The cgroup binder's two modes: a cgroup whose program has 16 ports for
/// `target`, and one whose program has none. None (and why, on stderr)
/// without root or cgroup v2.
fn cgroup_modes(target: SocketAddr) -> Option<[(CgroupBinder, TempCgroup); 2]> {
    let make = |ports: &[u16]| -> Result<(CgroupBinder, TempCgroup), binder::BinderError> {
        let cgroup = TempCgroup::create()?;
        let binder = CgroupBinder::attach(cgroup.path())?;
        if !ports.is_empty() {
            binder.set_ports(Ipv4Addr::UNSPECIFIED.into(), target, ports)?;
        }
        // Dropped in order: the program is detached before the cgroup goes.
        Ok((binder, cgroup))
    };
    let ports: Vec<u16> = (50000..50016).collect();
    match (make(&ports), make(&[])) {
        (Ok(planned), Ok(unplanned)) => Some([planned, unplanned]),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("cgroup-bpf modes skipped: {e}");
            None
        }
    }
}

/// One mode's connect times, µs.
struct ModeRow<'a> {
    mode: &'a str,
    samples: usize,
    median_us: Option<f64>,
    p90_us: Option<f64>,
    /// Median minus plain connect's median.
    added_us: Option<f64>,
}

/// The human-readable table: on stdout, or on stderr when stdout carries
/// the JSON.
fn print_table(
    json: bool,
    target: SocketAddr,
    n: usize,
    rounds: usize,
    rows: &[ModeRow],
    table: Option<srap::alloc::table::TableStats>,
) {
    let mut text = format!("connect() to {target}, {n} per process, {rounds} rounds (us)\n");
    text += &format!(
        "{:<24} {:>8} {:>8} {:>8}\n",
        "mode", "samples", "median", "p90"
    );
    for r in rows {
        text += &format!(
            "{:<24} {:>8} {:>8} {:>8}\n",
            r.mode,
            r.samples,
            one_decimal(r.median_us),
            one_decimal(r.p90_us)
        );
    }
    text += "added by the binder (median, minus plain):\n";
    for r in rows.iter().skip(1) {
        text += &format!("  {:<24} {:>6} us\n", r.mode, one_decimal(r.added_us));
    }
    text += &format!("srap lease table: {table:?}");
    if json {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
}

/// A value with one decimal, or "n/a" when it was not measured.
fn one_decimal(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.1}"))
}

fn main() {
    if let Ok(target) = std::env::var("OVERHEAD_CHILD") {
        let n = std::env::var("OVERHEAD_N").unwrap().parse().unwrap();
        client(target.parse().unwrap(), n);
        return;
    }
    let json = std::env::args().any(|a| a == "--json");
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| a != "--json")
        .map(|a| a.parse().unwrap_or_else(|_| panic!("not a count: {a}")))
        .collect();
    let n = args.first().copied().unwrap_or(2000);
    let rounds = args.get(1).copied().unwrap_or(5);

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in listener.incoming() {
            drop(c);
        }
    });
    let dir = std::env::temp_dir().join(format!("steer-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("alloc.sock");
    allocator(&sock);
    // Steer's allocator, with a 2-queue config for the loopback target.
    let srap_sock = dir.join("srap.sock");
    let mut options = srap::alloc::ServerOptions::new(&srap_sock);
    options.grace = std::time::Duration::from_secs(2);
    let server = srap::alloc::Server::bind(options).unwrap();
    let config = rss::RssConfig::ethtool_default(rss::RssKey::microsoft(), 2, 128).unwrap();
    server.allocator().set_config(target.ip(), config).unwrap();
    let server = server.spawn();
    let shim = binder::preload::install_shim_in(&dir).unwrap();
    let mut modes = vec![
        "plain",
        "preload",
        "preload-one-by-one",
        "preload-srap",
        "preload-srap-one-by-one",
        "preload-srap-round-trip",
        "preload-no-allocator",
    ];
    let cgroups = cgroup_modes(target);
    if cgroups.is_some() {
        modes.extend(["cgroup-bpf", "cgroup-bpf-no-plan"]);
    }
    let mut samples: Vec<Vec<u64>> = vec![Vec::new(); modes.len()];
    for _ in 0..rounds {
        for (i, mode) in modes.iter().enumerate() {
            let mut cmd = Command::new(std::env::current_exe().unwrap());
            cmd.env("OVERHEAD_CHILD", target.to_string())
                .env("OVERHEAD_N", n.to_string());
            if mode.ends_with("one-by-one") || mode.ends_with("round-trip") {
                cmd.env(binder::preload::BATCH_ENV, "1");
            }
            if mode.ends_with("round-trip") {
                cmd.env(binder::preload::TABLE_ENV, "0");
            }
            match *mode {
                "preload" | "preload-one-by-one" => {
                    binder::preload::configure(&mut cmd, &shim, Some(&sock))
                }
                "preload-srap" | "preload-srap-one-by-one" | "preload-srap-round-trip" => {
                    binder::preload::configure(&mut cmd, &shim, Some(&srap_sock))
                }
                "preload-no-allocator" => {
                    binder::preload::configure(&mut cmd, &shim, Some(&dir.join("absent.sock")))
                }
                "cgroup-bpf" | "cgroup-bpf-no-plan" => {
                    let [planned, unplanned] = cgroups.as_ref().expect("cgroup modes only then");
                    let (_, cgroup) = if *mode == "cgroup-bpf" {
                        planned
                    } else {
                        unplanned
                    };
                    cgroup.enter_in_child(&mut cmd).unwrap();
                }
                _ => {}
            }
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{out:?}");
            samples[i].extend(
                String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .filter_map(|s| s.parse::<u64>().ok()),
            );
        }
    }
    let quantile = |s: &[u64], q| {
        let us: Vec<f64> = s.iter().map(|&ns| ns as f64 / 1000.0).collect();
        stats::quantile(&us, q)
    };
    let plain = quantile(&samples[0], 0.5);
    let rows: Vec<ModeRow> = modes
        .iter()
        .zip(&samples)
        .enumerate()
        .map(|(i, (mode, s))| ModeRow {
            mode,
            samples: s.len(),
            median_us: quantile(s, 0.5),
            p90_us: quantile(s, 0.9),
            // Plain connect is the base the others are measured against.
            added_us: (i > 0)
                .then(|| quantile(s, 0.5).zip(plain).map(|(m, p)| m - p))
                .flatten(),
        })
        .collect();
    // How many srap leases came from the table (else the table modes
    // measured round trips).
    let table = server.allocator().table_stats();
    print_table(json, target, n, rounds, &rows, table);
    // The planned mode must really have bound (else it measured a
    // fallback), the unplanned one never (else it measured a bind).
    let connects = (n * rounds) as u64;
    let binders = cgroups.as_ref().map(|[(planned, _), (unplanned, _)]| {
        let read = |b: &CgroupBinder| b.stats().expect("the cgroup binder's counters");
        (read(planned), read(unplanned))
    });
    let wrong: Vec<String> = binders
        .iter()
        .flat_map(|(planned, unplanned)| {
            [
                planned
                    .all_bound(connects)
                    .map_err(|e| format!("cgroup-bpf: {e}")),
                unplanned
                    .none_planned(connects)
                    .map_err(|e| format!("cgroup-bpf-no-plan: {e}")),
            ]
        })
        .filter_map(Result::err)
        .collect();
    if let Some((planned, unplanned)) = &binders {
        eprintln!("cgroup-bpf: {planned}");
        eprintln!("cgroup-bpf-no-plan: {unplanned}");
    }
    if json {
        let modes: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.mode, "samples": r.samples, "median_us": r.median_us,
                    "p90_us": r.p90_us, "added_us": r.added_us,
                })
            })
            .collect();
        let table = table.map(|t| {
            serde_json::json!({
                "claims": t.claims, "round_trips": t.round_trips,
                "taken_back": t.taken_back, "foreign": t.foreign,
            })
        });
        let cgroup_binder = binders.map(|(planned, unplanned)| {
            serde_json::json!({
                "connects_per_mode": connects, "cgroup-bpf": planned,
                "cgroup-bpf-no-plan": unplanned,
            })
        });
        let out = serde_json::json!({
            "connects_per_process": n, "rounds": rounds, "modes": modes, "srap_table": table,
            "cgroup_binder": cgroup_binder,
        });
        println!("{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !wrong.is_empty() {
        eprintln!(
            "error: a cgroup mode measured another path than its name: {}",
            wrong.join("; ")
        );
        std::process::exit(1);
    }
}

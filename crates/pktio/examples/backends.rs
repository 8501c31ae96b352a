//! The two backends side by side: frames per second from one end of a veth
//! pair to the other, a sending thread on CPU 0 and a busy-polling
//! receiving thread on CPU 1, AF_PACKET against AF_XDP, 64 B and 1500 B
//! frames, the modes alternated in every round so both see the same
//! machine. Needs root (a namespace, veths, XDP).
//!
//! ```text
//! cargo run --release -p pktio --example backends -- [SECONDS] [ROUNDS]
//! ```
//!
//! Prints each run and, per frame size, the median rate of each backend and
//! their ratio; `--json` prints them as JSON.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pktio::{Backend, Port, PortConfig};

const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
const SIZES: [usize; 2] = [64, 1500];
const BACKENDS: [Backend; 2] = [Backend::Packet, Backend::Xdp];

/// A namespace with a veth pair a <-> b, deleted on drop.
struct Netns(String);

impl Netns {
    fn new() -> Result<Netns, String> {
        let name = format!("pktio-bench{}", std::process::id());
        host::netns::add(&name).map_err(|e| e.to_string())?;
        let ns = Netns(name.clone());
        host::link::add_veth("a", &name, "b", &name).map_err(|e| e.to_string())?;
        for dev in ["a", "b"] {
            host::link::set_up(&name, dev).map_err(|e| e.to_string())?;
        }
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = host::netns::delete(&self.0);
    }
}

fn pin_to(cpu: usize) {
    if let Err(e) = host::cpu::pin_current_thread(cpu) {
        eprintln!("error: {e} (the benchmark needs two CPUs)");
        std::process::exit(3);
    }
}

struct Run {
    backend: Backend,
    size: usize,
    mpps: f64,
    /// Frames the receiving kernel dropped (the port could not take them).
    drops: u64,
    /// Frames the sending device refused.
    tx_errors: u64,
}

fn run(ns: &str, backend: Backend, size: usize, seconds: f64) -> Result<Run, String> {
    let cfg = PortConfig {
        backend,
        ..PortConfig::default()
    };
    let mut tx = Port::open("a", Some(ns), &cfg).map_err(|e| e.to_string())?;
    let rx = Port::open("b", Some(ns), &cfg).map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU32::new(0));
    let receiver = {
        let (stop, received) = (stop.clone(), received.clone());
        let mut rx = rx;
        std::thread::spawn(move || {
            pin_to(1);
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                rx.recv_batch(256, |f| {
                    if f.data.get(12..14) == Some(&ETHERTYPE[..]) {
                        n += 1;
                    }
                });
                received.store(n, Ordering::Relaxed);
            }
            rx.kernel_drops().map_err(|e| e.to_string())
        })
    };
    pin_to(0);
    let mut frame = vec![0u8; size];
    frame[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    frame[12..14].copy_from_slice(&ETHERTYPE);
    let batch = vec![frame; 64];
    // Warm up, then count from a clean start.
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(200) {
        tx.send_batch(&batch).map_err(|e| e.to_string())?;
    }
    let start_count = received.load(Ordering::Relaxed);
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds {
        tx.send_batch(&batch).map_err(|e| e.to_string())?;
    }
    let frames = received.load(Ordering::Relaxed) - start_count;
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let drops = receiver.join().map_err(|_| "receiver panicked")??;
    Ok(Run {
        backend,
        size,
        mpps: f64::from(frames) / elapsed / 1e6,
        drops,
        tx_errors: tx.stats().tx_errors,
    })
}

fn name(b: Backend) -> &'static str {
    match b {
        Backend::Packet => "af_packet",
        Backend::Xdp => "af_xdp",
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let nums: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let parse = |i: usize, default: f64| -> f64 {
        nums.get(i).map_or(default, |s| {
            s.parse().unwrap_or_else(|_| {
                eprintln!(
                    "error: '{s}' is not a number (usage: backends [SECONDS] [ROUNDS] [--json])"
                );
                std::process::exit(2)
            })
        })
    };
    let (seconds, rounds) = (parse(0, 2.0), parse(1, 3.0) as usize);
    if !host::is_root() {
        eprintln!("error: needs root (a network namespace, veths, XDP)");
        std::process::exit(3);
    }
    let ns = Netns::new().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let mut runs = Vec::new();
    for round in 0..rounds {
        for size in SIZES {
            // Alternate which backend goes first.
            let order: Vec<Backend> = if round % 2 == 0 {
                BACKENDS.to_vec()
            } else {
                BACKENDS.iter().rev().copied().collect()
            };
            for backend in order {
                let r = run(&ns.0, backend, size, seconds).unwrap_or_else(|e| {
                    eprintln!("error: {} {size} B: {e}", name(backend));
                    std::process::exit(1)
                });
                if !json {
                    eprintln!(
                        "round {round}: {:9} {size:5} B  {:6.3} Mpps  drops {}  tx refused {}",
                        name(backend),
                        r.mpps,
                        r.drops,
                        r.tx_errors
                    );
                }
                runs.push(r);
            }
        }
    }
    let median = |b: Backend, size: usize| {
        let mut v: Vec<f64> = runs
            .iter()
            .filter(|r| r.backend == b && r.size == size)
            .map(|r| r.mpps)
            .collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut rows = Vec::new();
    for size in SIZES {
        let (p, x) = (median(Backend::Packet, size), median(Backend::Xdp, size));
        rows.push(format!(
            "{{\"size\":{size},\"af_packet_mpps\":{p:.4},\"af_xdp_mpps\":{x:.4},\"ratio\":{:.3}}}",
            x / p
        ));
        if !json {
            println!(
                "{size:5} B: af_packet {p:.3} Mpps, af_xdp {x:.3} Mpps, af_xdp / af_packet {:.2} (median of {rounds})",
                x / p
            );
        }
    }
    if json {
        println!(
            "{{\"seconds\":{seconds},\"rounds\":{rounds},\"sizes\":[{}]}}",
            rows.join(",")
        );
    }
}

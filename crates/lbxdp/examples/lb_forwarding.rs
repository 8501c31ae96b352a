//! Benchmark (not a test): peak packets per second the XDP load balancer
//! delivers to backends, against plain kernel forwarding through the same
//! load-balancer namespace, alternating in one run (docs/performance.md,
//! "Load balancer data plane").
//!
//! Unpaced senders: `THREADS` threads in the client namespace, each with its
//! own AF_PACKET socket (`pktio::Port`, `PACKET_QDISC_BYPASS`), send 64-byte
//! UDP frames to the VIP (64 flows, addressed to the load balancer's MAC) in
//! `sendmmsg` batches of 256 as fast as the kernel takes them, for `SECONDS`
//! per sample. Mode `xdp`: the load balancer program forwards them (XDP_TX,
//! L2 DSR) to both backends. Mode `kernel`: no program; the namespace routes
//! the VIP to backend 0 (`ip_forward=1`), the plain veth forwarding path.
//! Delivered = packets counted by the backends' software RSS (the same XDP
//! counters in both modes) per second; the load balancer's own veth
//! counters give what reached it.
//!
//! Run: cargo run --release -p lbxdp --example lb_forwarding -- [SECONDS] [ROUNDS] [THREADS]

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lbxdp::live::{LiveLab, LiveSpec};
use lbxdp::{ControlLoop, LivePolicy};
use rss::{FlowTuple, L4Proto};

fn delivered(live: &LiveLab) -> u64 {
    live.backends
        .iter()
        .map(|b| {
            lbxdp::live::queue_counts(b, live.spec.queues)
                .unwrap_or_default()
                .iter()
                .sum::<u64>()
        })
        .sum()
}

/// rx_packets of a device in a namespace (`/proc/thread-self/net/dev`,
/// read from a thread inside it: sysfs would show the caller's namespace).
fn rx_packets(netns: &str, dev: &str) -> u64 {
    let dev = format!("{dev}:");
    host::netns::run_in(Some(netns), move || {
        std::fs::read_to_string("/proc/thread-self/net/dev")
            .ok()
            .and_then(|t| {
                t.lines()
                    .map(str::trim_start)
                    .find(|l| l.starts_with(&dev))
                    .and_then(|l| l[dev.len()..].split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    })
    .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if !host::is_root() {
        eprintln!("skipped: needs root (namespaces, XDP)");
        std::process::exit(3);
    }
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3.0);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let mut spec = LiveSpec::new(&lab::unique_name("lbfw"));
    spec.backends = 2;
    spec.clients = 1;
    let live = LiveLab::up(&spec)?;
    let ctl = ControlLoop::start(
        live.dp.clone(),
        LivePolicy::Hash,
        live.macs.clone(),
        spec.buckets,
        live.reporters()?,
        10.0,
    )?;
    let client = live.clients[0].clone();
    let cmac = lab::inject::mac_address(&client.netns, &client.dev)?;
    let lbmac = lab::inject::mac_address(&live.lb.netns, &live.lb.dev)?;
    let frames: Vec<Vec<u8>> = (0..256usize)
        .map(|i| {
            let t = FlowTuple::new(
                IpAddr::V4(client.ipv4),
                10_000 + (i % 64) as u16,
                IpAddr::V4(live.vip),
                9,
                L4Proto::Udp,
            );
            lab::packet::frame(&t, cmac, lbmac, 18).expect("IPv4 frame")
        })
        .collect();
    let frames = Arc::new(frames);
    let lb_ns = live.lb.netns.clone();
    // Kernel path: VIP routed to backend 0.
    host::netns::run_in(Some(&lb_ns), || {
        std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")
    })??;
    host::link::add_route(&lb_ns, live.vip.into(), 32, live.backends[0].ipv4.into())?;
    let lb_port = live.switch_port("lb").ok_or("no switch port for lb")?;
    // Senders: started once, switched on per sample.
    let on = Arc::new(AtomicBool::new(false));
    let quit = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let mut senders = Vec::new();
    for _ in 0..threads {
        let mut port = pktio::Port::open(
            &client.dev,
            Some(&client.netns),
            &pktio::PortConfig::default(),
        )?;
        let (on, quit, sent, frames) = (on.clone(), quit.clone(), sent.clone(), frames.clone());
        senders.push(std::thread::spawn(move || {
            while !quit.load(Ordering::Relaxed) {
                if !on.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                let n = port.send_batch(&frames[..]).unwrap_or(0);
                sent.fetch_add(n as u64, Ordering::Relaxed);
            }
        }));
    }
    println!(
        "{} rounds x 2 modes, {seconds} s each, {threads} unpaced sender thread(s), 64-byte UDP frames, 64 flows",
        rounds
    );
    let mut rows: Vec<(&str, f64, f64, f64)> = Vec::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            ["xdp", "kernel"]
        } else {
            ["kernel", "xdp"]
        };
        for mode in order {
            if mode == "xdp" {
                live.dp
                    .attach(&live.lb.dev, &live.lb.netns, Some((&lb_port.0, &lb_port.1)))?;
            } else {
                lbxdp::maps::detach(&live.lb.dev, &live.lb.netns);
            }
            std::thread::sleep(Duration::from_millis(200));
            let (d0, r0, s0) = (
                delivered(&live),
                rx_packets(&lb_ns, &live.lb.dev),
                sent.load(Ordering::Relaxed),
            );
            let start = Instant::now();
            on.store(true, Ordering::Relaxed);
            std::thread::sleep(Duration::from_secs_f64(seconds));
            let (d1, r1, s1) = (
                delivered(&live),
                rx_packets(&lb_ns, &live.lb.dev),
                sent.load(Ordering::Relaxed),
            );
            let secs = start.elapsed().as_secs_f64();
            on.store(false, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(300));
            let pps = (d1 - d0) as f64 / secs;
            let lb_rx = (r1 - r0) as f64 / secs;
            let tx = (s1 - s0) as f64 / secs;
            println!(
                "round {round} {mode:>6}: sent {tx:.0} pkt/s, reached LB {lb_rx:.0} pkt/s, delivered {pps:.0} pkt/s"
            );
            rows.push((mode, pps, lb_rx, tx));
        }
    }
    quit.store(true, Ordering::Relaxed);
    for s in senders {
        let _ = s.join();
    }
    let col = |m: &str, f: fn(&(&str, f64, f64, f64)) -> f64| {
        stats::mean(&rows.iter().filter(|r| r.0 == m).map(f).collect::<Vec<_>>())
            .ok_or_else(|| format!("no {m} round was measured"))
    };
    let (x, k) = (col("xdp", |r| r.1)?, col("kernel", |r| r.1)?);
    println!(
        "mean delivered: xdp {x:.0} pkt/s, kernel forwarding {k:.0} pkt/s, ratio {:.2} (goal >= 0.80)",
        x / k
    );
    println!(
        "mean reaching the LB: xdp {:.0} pkt/s, kernel {:.0} pkt/s; sent: xdp {:.0}, kernel {:.0}",
        col("xdp", |r| r.2)?,
        col("kernel", |r| r.2)?,
        col("xdp", |r| r.3)?,
        col("kernel", |r| r.3)?
    );
    drop(ctl);
    Ok(())
}

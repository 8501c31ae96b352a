//! Benchmark (not a test): packets per second the XDP load balancer
//! delivers to backends, against plain kernel forwarding through the same
//! load-balancer namespace, alternating in one run (docs/performance.md,
//! "Load balancer data plane").
//!
//! A client namespace injects UDP frames to the VIP with AF_PACKET
//! (`lab::inject::send_frames`), 64 flows, addressed to the load balancer's
//! MAC. Mode `xdp`: the load balancer program forwards them (XDP_TX, L2
//! DSR). Mode `kernel`: no program; the namespace routes the VIP to backend 0
//! (`ip_forward=1`), the plain veth forwarding path. Delivered = packets
//! counted by the backends' software RSS, per second of injection.
//!
//! Run: cargo run --release -p lbxdp --example lb_forwarding -- [FRAMES] [ROUNDS]

use std::net::IpAddr;
use std::time::Instant;

use lbxdp::live::{LiveLab, LiveSpec};
use lbxdp::{ControlLoop, LivePolicy};
use rss::{FlowTuple, L4Proto};

fn delivered(live: &LiveLab) -> u64 {
    live.agents()
        .iter()
        .map(|a| a.queue_counts().unwrap_or_default().iter().sum::<u64>())
        .sum()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (namespaces, XDP)");
        std::process::exit(3);
    }
    let mut args = std::env::args().skip(1);
    let frames: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(300_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let mut spec = LiveSpec::new(&lab::unique_name("lbfw"));
    spec.backends = 2;
    spec.clients = 1;
    let live = LiveLab::up(&spec)?;
    let ctl = ControlLoop::start(
        live.dp.clone(),
        LivePolicy::Hash,
        live.macs.clone(),
        spec.buckets,
        live.agents(),
        10.0,
    )?;
    let client = &live.clients[0];
    let cmac = lab::inject::mac_address(&client.netns, &client.dev)?;
    let lbmac = lab::inject::mac_address(&live.lb.netns, &live.lb.dev)?;
    let batch: Vec<Vec<u8>> = (0..frames)
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
    let lb_ns = live.lb.netns.clone();
    let ip = |args: &[&str]| {
        std::process::Command::new("ip")
            .args(args)
            .status()
            .map(|s| s.success())
    };
    // Kernel path: VIP routed to backend 0.
    lab::run_in_netns(&lb_ns, || {
        std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")
    })??;
    ip(&[
        "-n",
        &lb_ns,
        "route",
        "add",
        &format!("{}/32", live.vip),
        "via",
        &live.backends[0].ipv4.to_string(),
    ])?;
    let lb_port = (format!("{}-sw", spec.name), "port1".to_string());
    let mut rows = Vec::new();
    for round in 0..rounds {
        for mode in ["xdp", "kernel"] {
            if mode == "xdp" {
                live.dp
                    .attach(&live.lb.dev, &live.lb.netns, Some((&lb_port.0, &lb_port.1)))?;
            } else {
                lbxdp::maps::detach(&live.lb.dev, &live.lb.netns);
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            let before = delivered(&live);
            let start = Instant::now();
            let sent = lab::inject::send_frames(&client.netns, &client.dev, batch.clone())?;
            let secs = start.elapsed().as_secs_f64();
            std::thread::sleep(std::time::Duration::from_millis(300));
            let got = delivered(&live) - before;
            let pps = got as f64 / secs;
            println!("round {round} {mode:>6}: sent {sent} in {secs:.3} s, delivered {got} ({pps:.0} pkt/s)");
            rows.push((mode, pps));
        }
    }
    let mean = |m: &str| {
        let v: Vec<f64> = rows.iter().filter(|r| r.0 == m).map(|r| r.1).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    let (x, k) = (mean("xdp"), mean("kernel"));
    println!(
        "mean xdp {x:.0} pkt/s, kernel forwarding {k:.0} pkt/s, ratio {:.2}",
        x / k
    );
    drop(ctl);
    Ok(())
}

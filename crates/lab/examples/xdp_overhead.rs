//! Benchmark: what the XDP software RSS costs TCP throughput.
//!
//! One lab (sender `snd`, receiver `rcv`, tx checksum offload off on the
//! sender's veth in both modes), 4 parallel iperf3 flows, alternating between
//! "software RSS attached" and "no program" in one run, so both modes see the
//! same machine state. Prints every sample (from `iperf3 --json`), both
//! means, the ratio, and writes the same as JSON with `--json PATH`.
//!
//! ```text
//! sudo cargo run --release -p lab --example xdp_overhead -- [--reps 5] [--secs 5] [--streams 4]
//!     [--queues 4] [--json out.json] [--quick] [--same-cpu-pass] [--qsize 2048]
//! ```
//!
//! Needs root and iperf3; prints "skipped: ..." and exits 0 otherwise.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lab::{Lab, LabSpec};
use serde::Serialize;

#[derive(Serialize)]
struct Sample {
    rep: u32,
    mode: &'static str,
    gbit_per_s: f64,
    retransmits: u64,
}

#[derive(Serialize)]
struct Report {
    command: String,
    kernel: String,
    cpu_model: String,
    cpus: usize,
    reps: u32,
    secs: u32,
    streams: u32,
    queues: u32,
    same_cpu_pass: bool,
    queue_size: u32,
    samples: Vec<Sample>,
    mean_without_gbit: f64,
    mean_with_gbit: f64,
    ratio: f64,
}

struct Args {
    reps: u32,
    secs: u32,
    streams: u32,
    queues: u32,
    json: Option<String>,
    same_cpu_pass: bool,
    queue_size: u32,
}

fn parse_args() -> Args {
    let mut args = Args {
        reps: 5,
        secs: 5,
        streams: 4,
        queues: 4,
        json: None,
        same_cpu_pass: false,
        queue_size: 2048,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> u32 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&format!("{name} needs a number")))
        };
        match a.as_str() {
            "--reps" => args.reps = num("--reps"),
            "--secs" => args.secs = num("--secs"),
            "--streams" => args.streams = num("--streams"),
            "--queues" => args.queues = num("--queues"),
            "--quick" => {
                args.reps = 2;
                args.secs = 2;
            }
            "--json" => args.json = it.next(),
            "--same-cpu-pass" => args.same_cpu_pass = true,
            "--qsize" => args.queue_size = num("--qsize"),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    args
}

fn usage(msg: &str) -> ! {
    eprintln!("{msg}\nusage: xdp_overhead [--reps N] [--secs S] [--streams N] [--queues N] [--json PATH] [--quick] [--same-cpu-pass] [--qsize N]");
    std::process::exit(2);
}

fn skip(why: &str) -> ! {
    println!("skipped: {why}");
    std::process::exit(0);
}

fn text(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn cpu_model() -> String {
    text("lscpu", &[])
        .lines()
        .find_map(|l| l.strip_prefix("Model name:"))
        .map(|m| m.trim().to_string())
        .unwrap_or_default()
}

/// One iperf3 run: (Gbit/s received, retransmits).
fn iperf(lab: &Lab, args: &Args, port: u16) -> Result<(f64, u64), String> {
    let rcv = lab.receiver();
    let out = lab
        .command(&lab.sender().name, "iperf3")
        .map_err(|e| e.to_string())?
        .args([
            "-c",
            &rcv.ipv4.to_string(),
            "-p",
            &port.to_string(),
            "-P",
            &args.streams.to_string(),
            "-t",
            &args.secs.to_string(),
            "-J",
        ])
        .output()
        .map_err(|e| format!("iperf3: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("iperf3 --json output: {e}"))?;
    if let Some(err) = v["error"].as_str() {
        return Err(format!("iperf3: {err}"));
    }
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or("iperf3: no end.sum_received")?;
    let retr = v["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
    Ok((bps / 1e9, retr))
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let args = parse_args();
    if !nix_root() {
        skip("needs root (network namespaces, XDP)");
    }
    if Command::new("iperf3").arg("--version").output().is_err() {
        skip("needs iperf3");
    }
    let mut spec = LabSpec::new(&lab::unique_name("xo"));
    spec.queues = args.queues;
    spec.ipv6 = false;
    let lab = match Lab::up(&spec) {
        Ok(lab) => lab.teardown_on_drop(),
        Err(e) if e.is_environment() => skip(&format!("lab: {e}")),
        Err(e) => {
            eprintln!("lab: {e}");
            std::process::exit(2);
        }
    };
    let rcv = lab.receiver().clone();
    let config = lab.rss_config().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let port = 5201;
    let server = lab
        .command(&rcv.name, "iperf3")
        .map(|mut c| {
            c.args(["-s", "-p", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
        })
        .ok()
        .and_then(Result::ok)
        .map(Server);
    if server.is_none() {
        skip("cannot start iperf3 -s");
    }
    std::thread::sleep(Duration::from_millis(300));

    let opts = nic::AttachOptions {
        same_cpu_pass: args.same_cpu_pass,
        queue_size: args.queue_size,
        ..nic::AttachOptions::default()
    };
    // The lab attached with defaults; apply this run's options.
    if let Err(e) = nic::attach(&rcv.dev, Some(&rcv.netns), &config, &opts) {
        eprintln!("attach: {e}");
        std::process::exit(1);
    }
    let mut samples = Vec::new();
    for rep in 0..args.reps {
        // Alternate which mode goes first, so drift hits both alike.
        let order: [bool; 2] = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for with in order {
            let attached = nic::attached_config(&rcv.dev, Some(&rcv.netns))
                .ok()
                .flatten()
                .is_some();
            let switched = match (with, attached) {
                (true, false) => nic::attach(&rcv.dev, Some(&rcv.netns), &config, &opts),
                (false, true) => nic::detach(&rcv.dev, Some(&rcv.netns)),
                _ => Ok(()),
            };
            if let Err(e) = switched {
                eprintln!("switching software RSS: {e}");
                std::process::exit(1);
            }
            match iperf(&lab, &args, port) {
                Ok((gbit, retransmits)) => {
                    let mode = if with { "software-rss" } else { "no-program" };
                    println!(
                        "rep {rep} {mode:>13}: {gbit:6.2} Gbit/s  ({retransmits} retransmits)"
                    );
                    samples.push(Sample {
                        rep,
                        mode,
                        gbit_per_s: gbit,
                        retransmits,
                    });
                }
                Err(e) => {
                    eprintln!("{e}");
                    std::process::exit(1);
                }
            }
        }
    }
    let of = |m: &str| -> Vec<f64> {
        samples
            .iter()
            .filter(|s| s.mode == m)
            .map(|s| s.gbit_per_s)
            .collect()
    };
    let (with, without) = (mean(&of("software-rss")), mean(&of("no-program")));
    let report = Report {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        kernel: text("uname", &["-r"]),
        cpu_model: cpu_model(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        reps: args.reps,
        secs: args.secs,
        streams: args.streams,
        queues: args.queues,
        same_cpu_pass: args.same_cpu_pass,
        queue_size: args.queue_size,
        mean_without_gbit: without,
        mean_with_gbit: with,
        ratio: if without > 0.0 { with / without } else { 0.0 },
        samples,
    };
    println!(
        "no program: {:.2} Gbit/s   software RSS: {:.2} Gbit/s   ratio {:.2} (goal >= 0.70)",
        report.mean_without_gbit, report.mean_with_gbit, report.ratio
    );
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("write {path}: {e}");
            std::process::exit(1);
        }
    }
    drop(server);
}

fn nix_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

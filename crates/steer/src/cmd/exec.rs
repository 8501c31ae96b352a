//! `steer exec` and `steer attach`: the transparent binders (crate `binder`,
//! docs/binders.md). Arguments are defined here; the work is in `binder`.

use std::net::{SocketAddr, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use binder::{BinderError, CgroupBinder, Plan, PortSet, TempCgroup};
use clap::Args;
use rss::RssConfig;

use crate::exit;
use crate::output;

/// Run a command whose TCP connections use steered source ports.
///
/// Default: LD_PRELOAD a small library that asks the allocator
/// (`--socket`, STEER_ALLOC_SOCK, /run/steer/alloc.sock) for a port at each
/// connect(). With `--bpf`: run the command in a fresh cgroup with the cgroup
/// BPF binder attached and the plan for `--to` computed from `--config`;
/// works for static binaries too. Any failure falls back to a kernel-chosen
/// port; the command never sees an error caused by steering.
///
/// Example: steer exec -- iperf3 -c 10.77.1.2 -P 8
/// Example: steer exec --bpf --to 10.77.1.2:5201 --config rcv.json -- iperf3 -c 10.77.1.2 -P 8
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The allocator's Unix socket (LD_PRELOAD binder).
    #[arg(long, conflicts_with = "bpf")]
    pub socket: Option<PathBuf>,
    /// Use the cgroup BPF binder instead of LD_PRELOAD.
    #[arg(long, requires_all = ["to", "config"])]
    pub bpf: bool,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Run the command in this network namespace (a name under /run/netns).
    #[arg(long)]
    pub netns: Option<String>,
    /// Log the binder's decisions to stderr (STEER_PRELOAD_DEBUG=1, or the
    /// cgroup binder's counters after the command).
    #[arg(long)]
    pub debug: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// The destinations to plan for, and the receiver's RSS.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Destination HOST:PORT to plan ports for (repeatable).
    #[arg(long, value_name = "HOST:PORT")]
    pub to: Vec<String>,
    /// The receiver's RssConfig JSON (`steer rss show --json`, `steer rss config`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Local source address (default: the route's source towards each --to).
    #[arg(long, value_name = "ADDR")]
    pub from: Option<std::net::IpAddr>,
    /// Ports planned per destination (1..=64; slots round-robin over the
    /// receiver's CPUs, one queue per slot).
    #[arg(long, default_value_t = binder::cgroup::MAX_PORTS)]
    pub ports: usize,
}

/// Attach the cgroup BPF binder to a cgroup, persistently.
///
/// Every unbound TCP socket in the cgroup (and its descendants) that
/// connects to a planned destination gets a planned source port. Run again
/// with more --to to add destinations; `--detach` removes it; with neither,
/// prints the binder's counters.
///
/// Example: steer attach --cgroup /sys/fs/cgroup/unified/app --to 10.77.1.2:5201 --config rcv.json
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// A cgroup v2 directory.
    #[arg(long)]
    pub cgroup: PathBuf,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Compute the source address (and so the plan) in this network namespace.
    #[arg(long)]
    pub netns: Option<String>,
    /// Detach the binder from the cgroup and remove its pins.
    #[arg(long, conflicts_with_all = ["to", "config"])]
    pub detach: bool,
}

/// Environment errors (privilege, kernel feature) exit 3 with one line;
/// the rest go to the common reporter.
fn check<T>(r: Result<T, BinderError>) -> anyhow::Result<Result<T, i32>> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e) if e.is_environment() => {
            eprintln!("steer: {e}");
            Ok(Err(exit::ENVIRONMENT))
        }
        Err(e) => Err(e.into()),
    }
}

macro_rules! tri {
    ($e:expr) => {
        match check($e)? {
            Ok(v) => v,
            Err(code) => return Ok(code),
        }
    };
}

fn read_config(path: &Path) -> anyhow::Result<RssConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    RssConfig::from_json(&text).with_context(|| format!("{}", path.display()))
}

fn parse_dest(s: &str) -> anyhow::Result<SocketAddr> {
    s.to_socket_addrs()
        .with_context(|| format!("--to {s}: expected HOST:PORT"))?
        .next()
        .with_context(|| format!("--to {s}: no address"))
}

/// One plan per --to.
fn plans(args: &PlanArgs, netns: Option<&str>) -> anyhow::Result<Result<Vec<Plan>, i32>> {
    let path = args.config.as_ref().context("--config is required")?;
    let config = read_config(path)?;
    if args.ports == 0 || args.ports > binder::cgroup::MAX_PORTS {
        anyhow::bail!(
            "--ports {}: must be 1..={}",
            args.ports,
            binder::cgroup::MAX_PORTS
        );
    }
    let mut out = Vec::new();
    for to in &args.to {
        let dest = parse_dest(to)?;
        let local = match args.from {
            Some(a) => a,
            None => {
                let r = match netns {
                    Some(ns) => binder::netns::run_in(ns, move || binder::plan::route_source(dest)),
                    None => binder::plan::route_source(dest),
                };
                match check(r)? {
                    Ok(a) => a,
                    Err(code) => return Ok(Err(code)),
                }
            }
        };
        let ports = PortSet::from_system();
        out.push(binder::plan_ports(
            &config,
            local,
            dest.ip(),
            dest.port(),
            args.ports,
            &ports,
        )?);
    }
    Ok(Ok(out))
}

pub fn run_exec(args: ExecArgs, _json: bool) -> anyhow::Result<i32> {
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    if let Some(ns) = &args.netns {
        tri!(binder::netns::enter_in_child(&mut cmd, ns));
    }
    if !args.bpf {
        let shim = tri!(binder::preload::install_shim());
        binder::preload::configure(&mut cmd, &shim, args.socket.as_deref());
        if args.debug {
            cmd.env(binder::preload::DEBUG_ENV, "1");
        }
        // Replace this process: signals and exit status are the command's.
        let err = cmd.exec();
        return Err(err).with_context(|| format!("cannot run {}", args.command[0]));
    }

    let plans = match plans(&args.plan, args.netns.as_deref())? {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    let cgroup = tri!(TempCgroup::create());
    let binder = tri!(CgroupBinder::attach(cgroup.path()));
    for plan in &plans {
        binder.set_plan(plan)?;
    }
    tri!(cgroup.enter_in_child(&mut cmd));
    let status = binder::run::wait_like_system(&mut cmd)
        .with_context(|| format!("cannot run {}", args.command[0]))?;
    if args.debug {
        let s = binder.stats()?;
        eprintln!(
            "steer: cgroup binder: {} bound, {} bind failures, {} fallbacks, {} without plan, {} skipped",
            s.bound, s.bind_failed, s.fallback, s.no_plan, s.skipped
        );
    }
    drop(binder);
    drop(cgroup);
    Ok(binder::run::exit_code(status))
}

pub fn run_attach(args: AttachArgs, json: bool) -> anyhow::Result<i32> {
    if args.detach {
        tri!(binder::cgroup::detach_pinned(&args.cgroup));
        eprintln!("cgroup binder detached from {}", args.cgroup.display());
        return Ok(exit::OK);
    }
    if args.plan.to.is_empty() {
        let b = tri!(CgroupBinder::open_pinned(&args.cgroup));
        let stats = b.stats()?;
        if json {
            output::json(&serde_json::json!({
                "cgroup": b.cgroup(), "destinations": b.plan_count(), "stats": stats
            }))?;
        } else {
            output::rows(&[
                ("cgroup", b.cgroup().display().to_string()),
                ("destinations", b.plan_count().to_string()),
                ("bound", stats.bound.to_string()),
                ("bind failures", stats.bind_failed.to_string()),
                ("fallbacks", stats.fallback.to_string()),
                ("no plan", stats.no_plan.to_string()),
                ("skipped", stats.skipped.to_string()),
            ])?;
        }
        return Ok(exit::OK);
    }
    let plans = match plans(&args.plan, args.netns.as_deref())? {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    let binder = match CgroupBinder::open_pinned(&args.cgroup) {
        Ok(b) => b,
        Err(BinderError::NotAttached { .. }) => {
            let mut b = tri!(CgroupBinder::attach(&args.cgroup));
            tri!(b.pin());
            b
        }
        Err(e) => tri!(Err(e)),
    };
    for plan in &plans {
        binder.set_plan(plan)?;
    }
    if json {
        output::json(&plans)?;
    } else {
        for plan in &plans {
            println!(
                "{} -> {}:{} ({} ports)",
                plan.local,
                plan.remote,
                plan.remote_port,
                plan.entries.len()
            );
            let body: Vec<Vec<String>> = plan
                .entries
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    vec![
                        i.to_string(),
                        e.port.to_string(),
                        e.queue.to_string(),
                        e.cpu.to_string(),
                    ]
                })
                .collect();
            output::table(&["slot", "port", "queue", "cpu"], &body)?;
        }
        eprintln!(
            "cgroup binder attached to {} (pinned in {})",
            binder.cgroup().display(),
            binder::cgroup::pin_dir(binder.cgroup())?.display()
        );
    }
    Ok(exit::OK)
}

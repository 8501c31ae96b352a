//! `steer exec` and `steer attach`: the transparent binders (crate `binder`,
//! docs/binders.md). Arguments are defined here; the work is in `binder`.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context};
use binder::plans::{LearnedReceiver, Planned};
use binder::{BinderStatus, CgroupBinder, DestinationArgs, InstalledPlans, TempCgroup};
use clap::Args;

use agent::ReceiverArgs;

use super::ports;
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
    /// The allocator's Unix socket (LD_PRELOAD binder); default
    /// $STEER_ALLOC_SOCK or /run/steer/alloc.sock.
    #[arg(long, conflicts_with = "bpf")]
    pub socket: Option<PathBuf>,
    /// Use the cgroup BPF binder instead of LD_PRELOAD (needs --to and the
    /// receiver's config).
    #[arg(long)]
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

/// The destinations to plan for, and the receiver's RSS (the same flags as
/// `steer ports plan`).
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub destinations: DestinationArgs,
    #[command(flatten)]
    pub receiver: ReceiverArgs,
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
    #[arg(long, conflicts_with_all = ["to", "config", "agent"])]
    pub detach: bool,
}

/// One plan per --to ([`binder::plans::plan_hosts`]), for the receiver
/// from [`ReceiverArgs::resolve`] and the source address the route gives in
/// network namespace `netns`.
fn plans(args: &PlanArgs, netns: Option<&str>, what: &str) -> anyhow::Result<Vec<Planned>> {
    args.destinations.check(what)?;
    if !args.receiver.is_given() {
        bail!(
            "{what} needs the receiver's RSS config: --config FILE, --agent URL, or --key KEY --queues N"
        );
    }
    let to = args
        .destinations
        .to
        .iter()
        .map(|to| ports::resolve(to))
        .collect::<anyhow::Result<Vec<_>>>()?;
    binder::plans::plan_hosts(
        &to,
        args.destinations.ports,
        args.destinations.from,
        |dest| {
            let r = args.receiver.resolve(dest)?;
            Ok(LearnedReceiver {
                config: r.config,
                loads: r.loads,
                seen_from: r.seen_from,
            })
        },
        |dest| Ok(agent::receiver::source_address(None, None, dest, netns)?.0),
    )
}

/// The LD_PRELOAD binder takes its ports from the allocator, which holds
/// the receivers' configs (`steer ports serve`): plan flags given without
/// `--bpf` would be silently ignored, so they are refused.
fn refuse_plan_flags(plan: &PlanArgs) -> anyhow::Result<()> {
    let given = plan.destinations.is_given()
        || plan.receiver.is_given()
        || !plan.receiver.table.weight.is_empty();
    if given {
        bail!(
            "--to, --from, --ports and the receiver flags (--config, --agent, --key, --queues, --weight) \
             need --bpf; without it the LD_PRELOAD binder asks the allocator (`steer ports serve`), \
             which holds the receiver's config"
        );
    }
    Ok(())
}

pub fn run_exec(args: ExecArgs, json: bool) -> anyhow::Result<i32> {
    if json {
        return Err(exit::usage(
            "steer exec prints the command's own output, which steer cannot turn into JSON; \
             drop --json (the exit status is the command's)",
        ));
    }
    if !args.bpf {
        refuse_plan_flags(&args.plan)?;
    }
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    if let Some(ns) = &args.netns {
        host::netns::enter_in_child(&mut cmd, ns).map_err(binder::BinderError::from)?;
    }
    if !args.bpf {
        let shim = binder::preload::install_shim()?;
        binder::preload::configure(&mut cmd, &shim, args.socket.as_deref());
        if args.debug {
            cmd.env(binder::preload::DEBUG_ENV, "1");
        }
        // Replace this process: signals and exit status are the command's.
        let err = cmd.exec();
        return Err(err).with_context(|| format!("cannot run {}", args.command[0]));
    }

    let plans = plans(&args.plan, args.netns.as_deref(), "--bpf")?;
    let cgroup = TempCgroup::create()?;
    let binder = CgroupBinder::attach(cgroup.path())?;
    binder::plans::install(&binder, &plans)?;
    cgroup.enter_in_child(&mut cmd)?;
    let status = host::command::wait_like_system(&mut cmd)
        .with_context(|| format!("cannot run {}", args.command[0]))?;
    if args.debug {
        output::note!("steer: cgroup binder: {}", binder.stats()?);
    }
    drop(binder);
    drop(cgroup);
    Ok(host::command::exit_code(status))
}

pub fn run_attach(args: AttachArgs, json: bool) -> anyhow::Result<i32> {
    if !args.cgroup.is_dir() {
        bail!(
            "--cgroup {}: no such directory (a cgroup v2 directory, e.g. under /sys/fs/cgroup)",
            args.cgroup.display()
        );
    }
    if args.detach {
        binder::cgroup::detach_pinned(&args.cgroup)?;
        if json {
            output::json(&serde_json::json!({ "cgroup": args.cgroup, "detached": true }))?;
        } else {
            output::note!("cgroup binder detached from {}", args.cgroup.display());
        }
        return Ok(exit::OK);
    }
    if args.plan.destinations.to.is_empty() {
        let binder = CgroupBinder::open_pinned(&args.cgroup)?;
        output::print(json, &BinderStatus::of(&binder)?)?;
        return Ok(exit::OK);
    }
    let plans = plans(&args.plan, args.netns.as_deref(), "steer attach")?;
    let binder = CgroupBinder::open_or_attach_pinned(&args.cgroup)?;
    binder::plans::install(&binder, &plans)?;
    output::print(
        json,
        &InstalledPlans(plans.into_iter().map(|p| p.plan).collect()),
    )?;
    if !json {
        output::note!(
            "cgroup binder attached to {} (pinned in {})",
            binder.cgroup().display(),
            binder::cgroup::pin_dir(binder.cgroup())?.display()
        );
    }
    Ok(exit::OK)
}

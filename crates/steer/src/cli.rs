//! Command-line arguments. The doc comments are the `--help` text.

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// Steer: predict, enforce and measure which CPU core each flow lands on.
///
/// A NIC spreads flows over receive queues with an RSS hash of the 4-tuple;
/// each queue is served by one core. Steer models that hash exactly (from the
/// live NIC), gives devices without RSS a software RSS in XDP, and measures
/// where flows really land.
#[derive(Debug, Parser)]
#[command(name = "steer", version, propagate_version = true)]
pub struct Cli {
    /// Print the result as JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses `std::env::args`; on a usage error clap prints it and exits 2.
    pub fn parse_from_env_or_exit() -> Self {
        let matches = Cli::help_command().get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }

    /// The command tree as `--help` shows it: the global `--json` is
    /// hidden where the command refuses it (`REFUSE_JSON`), so help says
    /// what the command does (issue 27, "Docs that drift").
    pub fn help_command() -> clap::Command {
        let mut cmd = Cli::command();
        for path in REFUSE_JSON {
            cmd = hide_json(cmd, path);
        }
        cmd
    }
}

/// The commands whose output is another program's own, which steer cannot
/// turn into JSON, so they refuse `--json` (with a usage error).
pub const REFUSE_JSON: &[&[&str]] = &[&["lab", "exec"], &["toe", "run"]];

/// Gives the command at `path` its own hidden `--json`: clap hands a
/// global argument to a subcommand only when it has none of that name, and
/// the value still reaches `Cli::json`, so the command can refuse it.
fn hide_json(cmd: clap::Command, path: &[&str]) -> clap::Command {
    match path.split_first() {
        None => cmd.arg(
            clap::Arg::new("json")
                .long("json")
                .global(true)
                .hide(true)
                .action(clap::ArgAction::SetTrue),
        ),
        Some((first, rest)) => cmd.mut_subcommand(*first, |c| hide_json(c, rest)),
    }
}

/// `items` in order, each once: a list flag that names a value twice (or
/// names it and `all`) runs it once.
pub fn each_once<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The RSS model: inspect a NIC, predict where a flow lands, write configs.
    #[command(subcommand)]
    Rss(RssCommand),
    /// Software RSS (XDP) for devices without RSS, such as veth.
    #[command(subcommand)]
    Nic(NicCommand),
    /// The namespace lab: a sender and a receiver joined by veths.
    #[command(subcommand)]
    Lab(LabCommand),
    /// Show, on a real datapath, how kernel-chosen source ports make parallel
    /// flows collide on receive queues, and how Steer's binders avoid it.
    ///
    /// Runs 16 iperf3 flows against a lab receiver with software RSS over 32
    /// queues, three ways (random, preload, bpf), and counts flows per queue
    /// from the receiver's XDP counters.
    Demo(crate::cmd::exp::ExpArgs<exp::demo::DemoParams>),
    /// Experiments, each writing one JSON result (`--json`) and a table.
    #[command(subcommand)]
    Exp(crate::cmd::exp::ExpCommand),
    /// The test matrix: run every experiment and benchmark as cases, keep a
    /// history, compare runs, check for state regressions, write a report.
    #[command(subcommand)]
    Bench(crate::cmd::bench::BenchCommand),
    /// Core-aware load balancing (CrossRSS): trace-driven comparison of policies.
    #[command(subcommand)]
    Lb(crate::cmd::lb::LbCommand),
    /// Run a command with steered source ports (LD_PRELOAD, or `--bpf`: a
    /// cgroup BPF binder).
    Exec(crate::cmd::exec::ExecArgs),
    /// Attach the cgroup BPF binder to a cgroup (or `--detach` it).
    Attach(crate::cmd::exec::AttachArgs),
    /// Serve this host's RSS configs, softirq load and the requester's seen
    /// address to senders over HTTP/JSON (docs/agent.md).
    Agent(crate::cmd::agent::AgentArgs),
    /// Port steering (SRAP): choose source ports so parallel flows land on
    /// distinct receiver cores; odds of random ports; the port allocator.
    #[command(subcommand)]
    Ports(crate::cmd::ports::PortsCommand),
    /// Reorder repair (SRPIC) and reordering metrics of captures.
    #[command(subcommand)]
    Reorder(crate::cmd::reorder::ReorderCommand),
    /// The impairment wire between the lab's hosts (delay, loss, rate) and
    /// the SRPIC receive path in the receiver.
    #[command(subcommand)]
    Wire(crate::cmd::wire::WireCommand),
    /// The match-action (RMT) pipeline emulator and Laminar's TCP on it.
    #[command(subcommand)]
    Rmt(crate::cmd::rmt::RmtCommand),
    /// Unmodified programs on the userspace TCP data path (an LD_PRELOAD
    /// sockets shim over the data path's shared-memory interface).
    #[command(subcommand)]
    Toe(crate::cmd::toe::ToeCommand),
}

#[derive(Debug, Subcommand)]
pub enum RssCommand {
    /// Read a device's RSS configuration from the kernel (ethtool netlink,
    /// ioctls, /proc/interrupts, RPS masks, netdev_rss_key).
    Show {
        /// Device to inspect; all devices when omitted.
        #[arg(long)]
        dev: Option<String>,
        /// Network namespace (a name under /run/netns) the device lives in;
        /// default: the namespace steer runs in.
        #[arg(long)]
        netns: Option<String>,
    },
    /// Predict the hash, indirection entry, queue and CPU of a flow.
    ///
    /// Endpoints are ADDR:PORT, [IPV6]:PORT, or bare addresses (then the
    /// 2-tuple is hashed). SRC is the remote sender, DST this receiver.
    ///
    /// Example: steer rss where 66.9.149.187:2794 161.142.100.80:1766 --key microsoft --queues 4
    Where(WhereArgs),
    /// Write an RssConfig as JSON, from stated assumptions, for `--config`.
    ///
    /// Example: steer rss config --key microsoft --queues 8 --weight 1 1 2 2 1 1 1 1 > cfg.json
    Config(rss::StatedArgs),
}

#[derive(Debug, Args)]
pub struct WhereArgs {
    /// Source endpoint (the sender): ADDR:PORT, [IPV6]:PORT or ADDR.
    #[arg(required_unless_present = "sockets")]
    pub src: Option<String>,
    /// Destination endpoint (this receiver).
    #[arg(required_unless_present = "sockets")]
    pub dst: Option<String>,
    /// Transport protocol of the flow.
    #[arg(long, value_enum, default_value_t = rss::L4Proto::Tcp)]
    pub proto: rss::L4Proto,
    /// Instead of one flow: every live TCP connection of this host, as the
    /// receiver sees it, flagging cores that carry more than one busy flow.
    #[arg(long, conflicts_with_all = ["src", "dst", "proto"])]
    pub sockets: bool,
    #[command(flatten)]
    pub source: nic::LocalConfigArgs,
}

/// The device a `steer nic` command works on, and its namespace.
#[derive(Debug, Args)]
pub struct NicDev {
    /// The network device (e.g. veth0).
    #[arg(long, value_name = "DEV", required_unless_present = "dev_positional")]
    dev: Option<String>,
    /// The device given as a bare argument (`steer nic stats veth0`): the
    /// older spelling of --dev, still accepted.
    #[arg(value_name = "DEV", hide = true, conflicts_with = "dev")]
    dev_positional: Option<String>,
    /// Network namespace (a name under /run/netns) the device lives in;
    /// default: the namespace steer runs in.
    #[arg(long)]
    pub netns: Option<String>,
}

impl NicDev {
    /// The device name, however it was given.
    pub fn name(&self) -> &str {
        self.dev
            .as_deref()
            .or(self.dev_positional.as_deref())
            .unwrap_or_default()
    }
}

#[derive(Debug, Subcommand)]
pub enum NicCommand {
    /// Load the XDP software RSS on the device with the given config.
    ///
    /// Example: steer nic attach --dev veth0 --config cfg.json
    Attach {
        #[command(flatten)]
        dev: NicDev,
        /// RssConfig JSON (from `steer rss config` or `steer rss show --json`).
        #[arg(long)]
        config: PathBuf,
        #[command(flatten)]
        options: nic::AttachOptions,
    },
    /// Change the key, table or fields of an attached software RSS, live.
    Update {
        #[command(flatten)]
        dev: NicDev,
        /// The new RssConfig JSON (same queue count as attached).
        #[arg(long)]
        config: PathBuf,
    },
    /// Per-queue and per-CPU packets and bytes counted by the software RSS.
    ///
    /// Example: steer nic stats --dev veth0 --netns tour-rcv
    Stats {
        #[command(flatten)]
        dev: NicDev,
        /// Zero the counters after reading them.
        #[arg(long)]
        reset: bool,
    },
    /// Per-flow counters (needs `attach --track-flows`).
    Flows {
        #[command(flatten)]
        dev: NicDev,
    },
    /// Remove the software RSS and restore the device.
    Detach {
        #[command(flatten)]
        dev: NicDev,
    },
}

/// The lab a command works on: `--lab NAME` (`--name` is the older
/// spelling, still accepted).
#[derive(Debug, Args)]
pub struct LabName {
    /// Name of the lab; its namespaces are NAME-HOST.
    #[arg(
        long = "lab",
        value_name = "NAME",
        alias = "name",
        default_value = "steer"
    )]
    pub name: String,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Create (or keep) the lab: namespaces, veths, addresses, software RSS.
    ///
    /// Example: steer lab up --lab tour --queues 4 --track-flows
    Up(LabUpArgs),
    /// Remove everything the lab created, and nothing else.
    Down {
        #[command(flatten)]
        lab: LabName,
    },
    /// What the lab consists of.
    Status {
        #[command(flatten)]
        lab: LabName,
    },
    /// Run a command in one of the lab's hosts; its exit status is the
    /// command's. Its output is the command's own, so --json is refused.
    ///
    /// Example: steer lab exec rcv --lab tour -- iperf3 -s
    Exec {
        /// The host to run in (a name from `lab up --hosts`, e.g. snd or rcv).
        host: String,
        #[command(flatten)]
        lab: LabName,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct LabUpArgs {
    #[command(flatten)]
    pub lab: LabName,
    #[command(flatten)]
    pub spec: lab::SpecArgs,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(cmd: &'a clap::Command, path: &[&str]) -> &'a clap::Command {
        path.iter().fold(cmd, |c, name| {
            c.find_subcommand(name)
                .unwrap_or_else(|| panic!("no command {path:?}"))
        })
    }

    /// A command that refuses --json does not list it in its help (it
    /// listed "Print the result as JSON"), and --json still reaches
    /// `Cli::json`, where the command refuses it.
    #[test]
    fn commands_that_refuse_json_do_not_offer_it() {
        let mut cmd = Cli::help_command();
        cmd.build();
        for path in REFUSE_JSON {
            let help = find(&cmd, path).clone().render_long_help().to_string();
            assert!(
                !help.contains("Print the result as JSON"),
                "{path:?}:\n{help}"
            );
            let argv = [&["steer"][..], path, &["--json", "h", "--", "true"]].concat();
            let matches = Cli::help_command().try_get_matches_from(argv).unwrap();
            assert!(Cli::from_arg_matches(&matches).unwrap().json, "{path:?}");
        }
        // The rest still offer it.
        let status = find(&cmd, &["lab", "status"])
            .clone()
            .render_long_help()
            .to_string();
        assert!(status.contains("Print the result as JSON"), "{status}");
    }
}

//! `steer ports odds|plan|serve|lease|status`: port steering (SRAP, crate
//! `srap`, docs/srap.md).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use rss::{IndirectionTable, L4Proto, RssConfig, RssKey};
use serde::Serialize;
use srap::alloc::{AllocClient, Server, ServerOptions};
use srap::{LocalPorts, Plan, PlanOptions, PortRange};

use crate::output;

#[derive(Debug, Subcommand)]
pub enum PortsCommand {
    /// What random source ports give: the exact probability that N flows on
    /// M cores are collision-free, the exact distribution of the most flows
    /// on one core, and a seeded Monte Carlo cross-check.
    ///
    /// Example: steer ports odds --flows 16 --cores 32
    Odds(OddsArgs),
    /// Source ports for N flows to HOST:PORT so that they land on distinct
    /// receiver CPUs (least-loaded first when flows outnumber CPUs).
    ///
    /// Needs the receiver's real RSS config: `--config FILE` (from
    /// `steer rss show --json` or `steer rss config` on the receiver), or
    /// `--key KEY --queues N`. Linux drivers use a random per-boot key by
    /// default, which a sender cannot guess.
    ///
    /// Example: steer ports plan --to 10.77.1.2:5201 --flows 16 --config rcv.json
    Plan(PlanArgs),
    /// Run the port allocator: a Unix socket service that hands out source
    /// ports so that concurrent processes get distinct receiver cores
    /// (protocol: docs/srap.md).
    ///
    /// Example: steer ports serve --config rcv.json --for 10.77.1.2
    Serve(ServeArgs),
    /// Ask the allocator for one port (what the binders do per connect()).
    Lease(LeaseArgs),
    /// The allocator's live leases and configured receivers.
    Status(SocketArg),
}

#[derive(Debug, Args)]
pub struct OddsArgs {
    /// Parallel flows.
    #[arg(long, default_value_t = 16)]
    pub flows: u32,
    /// Receiver cores (one queue each, equal indirection table).
    #[arg(long, default_value_t = 32)]
    pub cores: u32,
    /// Monte Carlo trials.
    #[arg(long, default_value_t = 100_000)]
    pub trials: u64,
    /// Seed of the Monte Carlo run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    fn l4(self) -> L4Proto {
        match self {
            Proto::Tcp => L4Proto::Tcp,
            Proto::Udp => L4Proto::Udp,
        }
    }
}

/// How the indirection table is filled.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TableFill {
    /// ethtool's default: entry i -> queue i % queues.
    Default,
}

/// The receiver's config: a file, or stated assumptions.
#[derive(Debug, Args)]
pub struct ReceiverArgs {
    /// The receiver's RssConfig JSON.
    #[arg(long, conflicts_with_all = ["key", "queues", "weight"])]
    pub config: Option<PathBuf>,
    /// The receiver's key: `microsoft`, `symmetric`, hex bytes (colons
    /// allowed), or `@FILE` with hex (e.g. a copy of the receiver's
    /// /proc/sys/net/core/netdev_rss_key). `default` (the Linux default,
    /// a random per-boot key) cannot be steered and is refused.
    #[arg(long)]
    pub key: Option<String>,
    /// Receive queues (queue q served by CPU q).
    #[arg(long)]
    pub queues: Option<u32>,
    /// Indirection table fill.
    #[arg(long, value_enum, default_value_t = TableFill::Default)]
    pub table: TableFill,
    /// Indirection table size.
    #[arg(long, default_value_t = 128)]
    pub table_size: usize,
    /// Fill the table like `ethtool -X DEV weight W0 W1 ...` instead.
    #[arg(long, num_args = 1.., value_name = "W")]
    pub weight: Vec<u32>,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The receiver: HOST:PORT (IPv6 as [ADDR]:PORT).
    #[arg(long)]
    pub to: String,
    /// Flows to plan.
    #[arg(long, default_value_t = 16)]
    pub flows: usize,
    /// Source address as the receiver sees it; default: the address the
    /// kernel picks towards HOST.
    #[arg(long)]
    pub from: Option<IpAddr>,
    #[arg(long, value_enum, default_value_t = Proto::Tcp)]
    pub proto: Proto,
    /// Source ports to choose from, LOW-HIGH; default: this host's
    /// ip_local_port_range (ports in use and reserved ports are always skipped).
    #[arg(long)]
    pub port_range: Option<PortRange>,
    /// Seed of the scan's starting port (reproducible plans).
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub receiver: ReceiverArgs,
}

#[derive(Debug, Args)]
pub struct SocketArg {
    /// Allocator socket; default $STEER_ALLOC_SOCK or /run/steer/alloc.sock.
    #[arg(long)]
    pub socket: Option<PathBuf>,
}

impl SocketArg {
    fn path(&self) -> PathBuf {
        self.socket.clone().unwrap_or_else(srap::alloc::socket_path)
    }
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub socket: SocketArg,
    /// RssConfig JSON of a receiver; pair each with a --for.
    #[arg(long)]
    pub config: Vec<PathBuf>,
    /// The receiver address the matching --config is for.
    #[arg(long = "for", value_name = "ADDR")]
    pub for_addr: Vec<IpAddr>,
    /// Milliseconds a lease lives without a matching socket.
    #[arg(long, default_value_t = 2000)]
    pub grace_ms: u64,
}

#[derive(Debug, Args)]
pub struct LeaseArgs {
    /// The receiver: ADDR:PORT.
    #[arg(long)]
    pub to: SocketAddr,
    /// Local address; default: the allocator's routed source address.
    #[arg(long)]
    pub from: Option<IpAddr>,
    #[arg(long, value_enum, default_value_t = Proto::Tcp)]
    pub proto: Proto,
    #[command(flatten)]
    pub socket: SocketArg,
}

pub fn run(cmd: PortsCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        PortsCommand::Odds(args) => odds(&args, json),
        PortsCommand::Plan(args) => plan(&args, json),
        PortsCommand::Serve(args) => serve(&args),
        PortsCommand::Lease(args) => lease(&args, json),
        PortsCommand::Status(args) => status(&args, json),
    }
}

fn percent(p: f64) -> String {
    if p == 0.0 {
        "0".into()
    } else if p >= 0.0001 {
        format!("{:.2}%", p * 100.0)
    } else {
        format!("{p:.3e}")
    }
}

fn odds(args: &OddsArgs, json: bool) -> anyhow::Result<i32> {
    let odds = srap::odds::odds(args.flows, args.cores, args.trials, args.seed)?;
    if json {
        output::json(&odds)?;
        return Ok(0);
    }
    output::rows(&[
        (
            "flows on cores",
            format!("{} on {} (uniform, independent)", odds.flows, odds.cores),
        ),
        (
            "collision-free",
            format!(
                "{} exact, {} in {} trials (seed {})",
                percent(odds.collision_free),
                percent(odds.sampled_collision_free),
                odds.trials,
                odds.seed
            ),
        ),
        (
            "expected max",
            format!("{:.3} flows on one core", odds.expected_max),
        ),
    ])?;
    println!();
    let body: Vec<Vec<String>> = odds
        .distribution
        .iter()
        .filter(|r| r.exact >= 1e-12 || r.sampled > 0.0)
        .map(|r| vec![r.max.to_string(), percent(r.exact), percent(r.sampled)])
        .collect();
    output::table(&["max flows on a core", "exact", "monte carlo"], &body)?;
    let shown = body.len();
    if shown < odds.distribution.len() {
        println!("(rows with probability below 1e-12 omitted; --json lists all)");
    }
    Ok(0)
}

fn read_key(text: &str) -> anyhow::Result<RssKey> {
    Ok(match text {
        "default" => bail!(
            "--key default: Linux drivers hash with a random per-boot key (netdev_rss_key), so a \
             sender cannot predict the receiver's cores; steering needs the receiver's real key: \
             --config FILE (steer rss show --json on the receiver), --key HEX or --key @FILE"
        ),
        "microsoft" => RssKey::microsoft(),
        "symmetric" => RssKey::symmetric(40),
        file if file.starts_with('@') => {
            let path = &file[1..];
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read key {path}"))?;
            RssKey::from_hex(&text).with_context(|| format!("key file {path}"))?
        }
        hex => RssKey::from_hex(hex).context("--key")?,
    })
}

/// The receiver's config from `--config` or `--key/--queues/...`. The seam
/// where other sources (an agent) plug in.
pub fn receiver_config(args: &ReceiverArgs) -> anyhow::Result<RssConfig> {
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        return RssConfig::from_json(&text).with_context(|| format!("{}", path.display()));
    }
    let key = read_key(args.key.as_deref().unwrap_or("default"))?;
    let Some(queues) = args.queues else {
        bail!("--key needs --queues N (the receiver's receive queue count)");
    };
    let mut config = RssConfig::ethtool_default(key, queues, args.table_size)?;
    let TableFill::Default = args.table;
    if !args.weight.is_empty() {
        if args.weight.len() != queues as usize {
            bail!(
                "--weight gives {} weights but --queues is {queues}",
                args.weight.len()
            );
        }
        config.indirection_table = IndirectionTable::weighted(args.table_size, &args.weight, 0)?;
    }
    config.validate()?;
    Ok(config)
}

fn resolve(to: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(addr) = to.parse::<SocketAddr>() {
        return Ok(addr);
    }
    to.to_socket_addrs()
        .with_context(|| format!("--to {to}: expected HOST:PORT"))?
        .next()
        .with_context(|| format!("--to {to}: no address"))
}

#[derive(Serialize)]
struct PlanResult<'a> {
    to: SocketAddr,
    from: IpAddr,
    /// Where `from` came from: "given" or "route".
    from_source: &'static str,
    port_range: PortRange,
    #[serde(flatten)]
    plan: &'a Plan,
}

/// Plans from an explicit config: what `steer ports plan` calls once it
/// has the receiver's config, whatever its source.
pub fn plan_from_config(
    config: &RssConfig,
    from: IpAddr,
    to: SocketAddr,
    proto: L4Proto,
    flows: usize,
    port_range: Option<PortRange>,
    seed: Option<u64>,
) -> anyhow::Result<(Plan, PortRange)> {
    if flows == 0 {
        bail!("--flows must be at least 1");
    }
    let local = LocalPorts::read(proto)?;
    let mut options = PlanOptions::from_local(&local);
    if let Some(range) = port_range {
        options.range = range;
    }
    options.seed = seed;
    let range = options.range;
    let plan = srap::plan_from_config(config, from, to.ip(), to.port(), proto, flows, &options)?;
    Ok((plan, range))
}

fn plan(args: &PlanArgs, json: bool) -> anyhow::Result<i32> {
    let to = resolve(&args.to)?;
    let config = receiver_config(&args.receiver)?;
    let (from, from_source) = match args.from {
        Some(a) => (a, "given"),
        None => (
            srap::alloc::source_address_for(to).with_context(|| {
                format!("no route to {to} to pick a source address; give --from")
            })?,
            "route",
        ),
    };
    let (plan, range) = plan_from_config(
        &config,
        from,
        to,
        args.proto.l4(),
        args.flows,
        args.port_range,
        args.seed,
    )?;
    if json {
        output::json(&PlanResult {
            to,
            from,
            from_source,
            port_range: range,
            plan: &plan,
        })?;
        return Ok(0);
    }
    let body: Vec<Vec<String>> = plan
        .entries
        .iter()
        .map(|e| {
            vec![
                e.port.to_string(),
                e.queue.to_string(),
                e.cpu.to_string(),
                format!("{:#010x}", e.hash),
            ]
        })
        .collect();
    output::table(&["port", "queue", "cpu", "hash"], &body)?;
    println!();
    let mut rows = vec![
        (
            "flow",
            format!("{from} -> {to} ({from_source} source address)"),
        ),
        (
            "cpus",
            format!(
                "{} flows on {} of {} receiver CPUs, at most {} per CPU",
                plan.flows,
                plan.cpus_used,
                plan.cpus.len(),
                plan.max_per_cpu
            ),
        ),
        ("port range", range.to_string()),
    ];
    if plan.flows > plan.cpus.len() {
        rows.push((
            "note",
            format!(
                "more flows than CPUs: least-loaded CPUs first, at most {} per CPU (ideal {})",
                plan.max_per_cpu, plan.ideal_max_per_cpu
            ),
        ));
    }
    if !plan.unreachable_cpus.is_empty() {
        rows.push((
            "note",
            format!(
                "no free port in the range reaches CPUs {:?}",
                plan.unreachable_cpus
            ),
        ));
    }
    output::rows(&rows)?;
    Ok(0)
}

fn serve(args: &ServeArgs) -> anyhow::Result<i32> {
    if args.config.len() != args.for_addr.len() {
        bail!(
            "give one --for ADDR per --config FILE ({} configs, {} addresses)",
            args.config.len(),
            args.for_addr.len()
        );
    }
    let mut configs = Vec::new();
    for (path, addr) in args.config.iter().zip(&args.for_addr) {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let config = RssConfig::from_json(&text).with_context(|| format!("{}", path.display()))?;
        configs.push((*addr, config));
    }
    let mut options = ServerOptions::new(args.socket.path());
    options.grace = Duration::from_millis(args.grace_ms);
    let server = Server::bind(options)?;
    for (addr, config) in configs {
        server
            .allocator()
            .set_config(addr, config)
            .map_err(|r| anyhow::anyhow!("{}", r.message))?;
    }
    eprintln!("steer: allocator listening on {}", server.path().display());
    server.run()?;
    Ok(0)
}

fn lease(args: &LeaseArgs, json: bool) -> anyhow::Result<i32> {
    let mut client = AllocClient::connect(args.socket.path())?;
    let lease = client.lease(args.proto.l4(), args.from, args.to.ip(), args.to.port())?;
    if json {
        output::json(&lease)?;
        return Ok(0);
    }
    output::rows(&[
        ("port", lease.port.to_string()),
        ("queue", lease.queue.to_string()),
        ("cpu", lease.cpu.to_string()),
        ("lease", lease.lease.to_string()),
    ])?;
    Ok(0)
}

fn status(args: &SocketArg, json: bool) -> anyhow::Result<i32> {
    let status = AllocClient::connect(args.path())?.status()?;
    if json {
        output::json(&status)?;
        return Ok(0);
    }
    let remotes: Vec<String> = status.remotes.iter().map(IpAddr::to_string).collect();
    output::rows(&[("receivers", remotes.join(" "))])?;
    let body: Vec<Vec<String>> = status
        .leases
        .iter()
        .map(|l| {
            vec![
                l.lease.to_string(),
                format!("{}:{}", l.local, l.port),
                format!("{}:{}", l.remote, l.remote_port),
                l.queue.to_string(),
                l.cpu.to_string(),
                l.age_ms.to_string(),
                if l.connected { "yes" } else { "no" }.into(),
            ]
        })
        .collect();
    output::table(
        &[
            "lease",
            "local",
            "remote",
            "queue",
            "cpu",
            "age ms",
            "connected",
        ],
        &body,
    )?;
    Ok(0)
}

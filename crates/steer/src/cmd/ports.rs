//! `steer ports odds|plan|serve|lease|status`: port steering (SRAP, crate
//! `srap`, docs/srap.md).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use agent::allocator::AllocatorArgs;
use agent::{PlanRequest, PlanResult, ReceiverArgs};
use anyhow::Context;
use clap::{Args, Subcommand};
use rss::L4Proto;
use srap::alloc::AllocClient;
use srap::{OddsArgs, PortRange, SocketArgs};

use crate::{exit, output};

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
    Serve(AllocatorArgs),
    /// Ask the allocator for one port (what the binders do per connect()).
    Lease(LeaseArgs),
    /// The allocator's live leases and configured receivers.
    Status(SocketArgs),
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The receiver: HOST:PORT (IPv6 as [ADDR]:PORT).
    #[arg(long, value_name = "HOST:PORT")]
    pub to: String,
    /// Parallel flows to plan (iperf3 -P).
    #[arg(short = 'P', long, default_value_t = 16)]
    pub flows: usize,
    /// Source address as the receiver sees it; default: the address the
    /// kernel picks towards HOST.
    #[arg(long)]
    pub from: Option<IpAddr>,
    /// Transport protocol of the flows.
    #[arg(long, value_enum, default_value_t = L4Proto::Tcp)]
    pub proto: L4Proto,
    /// Source ports to choose from, LOW-HIGH; default: this host's
    /// ip_local_port_range (ports in use and reserved ports are always skipped).
    #[arg(long)]
    pub port_range: Option<PortRange>,
    /// Seed of the scan's starting port, for reproducible plans; default:
    /// a random start.
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub receiver: ReceiverArgs,
}

#[derive(Debug, Args)]
pub struct LeaseArgs {
    /// The receiver: ADDR:PORT.
    #[arg(long, value_name = "ADDR:PORT")]
    pub to: SocketAddr,
    /// Local address; default: the allocator's routed source address.
    #[arg(long)]
    pub from: Option<IpAddr>,
    /// Transport protocol of the connection.
    #[arg(long, value_enum, default_value_t = L4Proto::Tcp)]
    pub proto: L4Proto,
    #[command(flatten)]
    pub socket: SocketArgs,
}

pub fn run(cmd: PortsCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        PortsCommand::Odds(args) => odds(&args, json),
        PortsCommand::Plan(args) => plan(&args, json),
        PortsCommand::Serve(args) => serve(&args, json),
        PortsCommand::Lease(args) => lease(&args, json),
        PortsCommand::Status(args) => status(&args, json),
    }
}

fn odds(args: &OddsArgs, json: bool) -> anyhow::Result<i32> {
    output::print(json, &args.odds()?)?;
    Ok(exit::OK)
}

/// `HOST:PORT` (IPv6 as `[ADDR]:PORT`), resolved.
pub fn resolve(to: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(addr) = to.parse::<SocketAddr>() {
        return Ok(addr);
    }
    to.to_socket_addrs()
        .with_context(|| format!("--to {to}: expected HOST:PORT"))?
        .next()
        .with_context(|| format!("--to {to}: no address"))
}

fn plan(args: &PlanArgs, json: bool) -> anyhow::Result<i32> {
    let to = resolve(&args.to)?;
    let receiver = args.receiver.resolve(to)?;
    let request = PlanRequest {
        to,
        from: args.from,
        proto: args.proto,
        flows: args.flows,
        port_range: args.port_range,
        seed: args.seed,
    };
    output::print(json, &PlanResult::new(&receiver, &request)?)?;
    Ok(exit::OK)
}

fn serve(args: &AllocatorArgs, json: bool) -> anyhow::Result<i32> {
    let (server, serving) = args.bind()?;
    // The note on stderr first, the JSON a script waits for last.
    output::note!("steer: allocator listening on {}", server.path().display());
    if json {
        // One object when listening, as `steer agent --json` does.
        output::json(&serving)?;
    }
    server.run()?;
    Ok(exit::OK)
}

fn lease(args: &LeaseArgs, json: bool) -> anyhow::Result<i32> {
    let mut client = AllocClient::connect(args.socket.path())?;
    let lease = client.lease(args.proto, args.from, args.to.ip(), args.to.port())?;
    output::print(json, &lease)?;
    Ok(exit::OK)
}

fn status(args: &SocketArgs, json: bool) -> anyhow::Result<i32> {
    let status = AllocClient::connect(args.path())?.status()?;
    output::print(json, &status)?;
    Ok(exit::OK)
}

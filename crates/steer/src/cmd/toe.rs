//! `steer toe run`: an unmodified program on the userspace TCP data path
//! (crate `toe`, docs/toe.md "Application interface"). Arguments here; the
//! service and the shim are `toe::app`.

use std::net::IpAddr;

use anyhow::Context;
use clap::{Args, Subcommand};
use lab::Lab;
use toe::app::Program;
use toe::{Endpoint, EndpointConfig};

use crate::cli::LabName;
use crate::{exit, output};

#[derive(Debug, Subcommand)]
pub enum ToeCommand {
    /// Run a program with its TCP sockets on the data path: the data path
    /// serves HOST's lab device (AF_XDP) at HOST's address, and the program
    /// runs in HOST's namespace with an LD_PRELOAD shim that moves its TCP
    /// sockets there (UNIX, UDP and loopback sockets stay the kernel's).
    /// The exit status is the program's; its output is its own, so --json
    /// is refused.
    ///
    /// Example: steer toe run rcv --lab tour -- python3 -m http.server 8000
    /// Example: steer lab exec snd --lab tour -- curl http://10.77.1.2:8000/
    /// Example: steer toe run rcv --lab tour --engine laminar -- python3 -m http.server 8000
    /// Example: steer toe run rcv --lab tour --engine pipeline --pipeline-threads 2 -- python3 -m http.server 8000
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lab host whose device the data path takes (e.g. rcv).
    pub host: String,
    #[command(flatten)]
    pub lab: LabName,
    /// The data path's address (default: the host's IPv4 address, which
    /// the host's kernel then no longer sees traffic for).
    #[arg(long)]
    pub addr: Option<IpAddr>,
    #[command(flatten)]
    pub engine: toe::EngineChoice,
    /// Log the shim's decisions to stderr (STEER_TOE_DEBUG=1) and print
    /// the data path's counters when the program ends.
    #[arg(long)]
    pub debug: bool,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub fn run(cmd: ToeCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        ToeCommand::Run(args) => run_program(args, json),
    }
}

fn run_program(args: RunArgs, json: bool) -> anyhow::Result<i32> {
    if json {
        return Err(exit::usage(
            "steer toe run prints the program's own output, which steer cannot turn into JSON; \
             drop --json (the exit status is the program's)",
        ));
    }
    let lab = Lab::open(&args.lab.name)?;
    let host = lab.host(&args.host)?.clone();
    let addr = args.addr.unwrap_or(IpAddr::V4(host.ipv4));
    lab::inject::checksums_in_software_towards(&lab, &host)?;
    let (port, mac) = lab::inject::xdp_port(&host).with_context(|| {
        format!(
            "the data path needs {}'s device for itself (a lab made with \
             `steer lab up --no-software-rss` leaves it free)",
            host.name
        )
    })?;
    let config = EndpointConfig {
        engine: args.engine.engine(),
        ..EndpointConfig::default()
    };
    let ep = Endpoint::new(port, mac, addr, config)?;
    let socket = toe::app::socket_path(&host.netns);
    let program = Program {
        netns: &host.netns,
        socket: &socket,
        command: &args.command,
        debug: args.debug,
    };
    let (status, counters) = toe::app::run(ep, &program)?;
    if args.debug {
        output::note!("steer: toe data path counters: {counters:?}");
    }
    Ok(host::command::exit_code(status))
}

//! `steer toe run`: an unmodified program on the userspace TCP data path
//! (crate `toe`, docs/toe.md "Application interface"). Arguments here; the
//! service and the shim are `toe::app`.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use lab::Lab;
use toe::app::Program;
use toe::{Endpoint, EndpointConfig, Engine, PipelineLayout};

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
    /// What carries established connections: toe's run-to-completion
    /// stages (FlexTOE's baseline), Laminar's match-action program in
    /// the RMT emulator (IPv4 and IPv6), or FlexTOE's fine-grained pipeline
    /// on worker threads (laid out by the --pipeline-* options). Opens,
    /// closes and timeouts are the endpoint's control plane either way.
    #[arg(long, value_enum, default_value_t = EngineArg::Toe)]
    pub engine: EngineArg,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Log the shim's decisions to stderr (STEER_TOE_DEBUG=1) and print
    /// the data path's counters when the program ends.
    #[arg(long)]
    pub debug: bool,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// The data path's engine on the command line (toe::Engine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    Toe,
    Laminar,
    Pipeline,
}

/// The pipelined engine's layout (toe::PipelineLayout); only with
/// `--engine pipeline`.
#[derive(Debug, Args)]
pub struct LayoutArgs {
    /// Flow groups: protocol stages, each with its own post-processors and
    /// copy stages (a connection's group is a hash of its 4-tuple).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=255))]
    pub pipeline_groups: u16,
    /// Pre-processors, shared by all flow groups.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub pipeline_pre: u16,
    /// Post-processors per flow group.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub pipeline_post: u16,
    /// Copy stages per flow group.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub pipeline_copy: u16,
    /// Worker threads the stages are spread over: 1 runs them all in turn
    /// on one core; a machine with cores to spare gives more.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub pipeline_threads: u16,
}

impl LayoutArgs {
    fn layout(&self) -> PipelineLayout {
        PipelineLayout {
            groups: usize::from(self.pipeline_groups),
            pre: usize::from(self.pipeline_pre),
            post: usize::from(self.pipeline_post),
            copy: usize::from(self.pipeline_copy),
            threads: usize::from(self.pipeline_threads),
        }
    }
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
        engine: match args.engine {
            EngineArg::Toe => Engine::Toe,
            EngineArg::Laminar => Engine::Laminar,
            EngineArg::Pipeline => Engine::Pipeline(args.layout.layout()),
        },
        ..EndpointConfig::default()
    };
    let ep = Endpoint::new(port, mac, addr, config)?;
    let socket = socket_path(&args.lab.name, &host.name);
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

/// The service's socket: one per lab host and run.
fn socket_path(lab: &str, host: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "steer-toe-{lab}-{host}-{}.sock",
        std::process::id()
    ))
}

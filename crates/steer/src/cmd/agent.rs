//! `steer agent`: serve this host's RSS configs, softirq load and the
//! requester's seen address over HTTP/JSON (crate `agent`, docs/agent.md).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

use ::agent::{Agent, FileSource, ServerOptions, Sources, Token};

use crate::{exit, output};

/// Serve this host's RSS configuration to senders (SRAP's RSS information
/// exchange), with per-CPU softirq load and Prometheus metrics.
///
/// Endpoints: GET /v1/rss?addr=IP (or ?dev=DEV), /v1/load, /v1/whoami,
/// /v1/devices, /metrics (docs/agent.md). A config change (ethtool -X, a new
/// key, IRQ affinity, `steer nic update`) is served with a new config_version.
///
/// Example: steer agent --listen 10.0.0.2:9477 --token-file /etc/steer/token --dev eth0
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Address and port to listen on. Anything but loopback needs a token.
    #[arg(long, default_value_t = SocketAddr::from(([127, 0, 0, 1], ::agent::DEFAULT_PORT)))]
    pub listen: SocketAddr,
    /// Shared token; every request must send `Authorization: Bearer TOKEN`.
    /// Prefer --token-file: a command line is visible to every local user.
    #[arg(long, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// File holding the shared token (surrounding whitespace ignored).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Serve these devices (each must have a readable config at start).
    /// Default: every device of the namespace, unless --config is given.
    #[arg(long, num_args = 1..)]
    pub dev: Vec<String>,
    /// Network namespace (a name under /run/netns) to serve: the listener,
    /// the devices and their software RSS state are taken from it.
    /// Default: the namespace the agent runs in. Prefer this to `ip netns
    /// exec`, whose fresh /sys hides the pinned software RSS.
    #[arg(long)]
    pub netns: Option<String>,
    /// An RssConfig JSON file for a host whose NIC cannot be read; pair each
    /// with --for. Re-read every poll: rewrite it atomically (write + rename).
    #[arg(long, requires = "for_addr")]
    pub config: Vec<PathBuf>,
    /// The local address the matching --config applies to.
    #[arg(long = "for", value_name = "ADDR", requires = "config")]
    pub for_addr: Vec<IpAddr>,
    /// How often /proc/softirqs, /proc/stat and queue counters are sampled.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub load_interval_ms: u64,
    /// How often every config is re-read and compared.
    #[arg(long, default_value_t = 500, value_name = "MS")]
    pub config_interval_ms: u64,
}

fn token(args: &AgentArgs) -> anyhow::Result<Option<Token>> {
    let text = match (&args.token, &args.token_file) {
        (Some(t), _) => t.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the token file {}", path.display()))?,
        (None, None) => return Ok(None),
    };
    Ok(Some(Token::new(&text).context("--token")?))
}

pub fn run(args: AgentArgs, json: bool) -> anyhow::Result<i32> {
    if args.config.len() != args.for_addr.len() {
        bail!(
            "give one --for ADDR per --config FILE ({} --config, {} --for)",
            args.config.len(),
            args.for_addr.len()
        );
    }
    let files = args
        .config
        .iter()
        .zip(&args.for_addr)
        .map(|(path, addr)| FileSource {
            path: path.clone(),
            addrs: vec![*addr],
        })
        .collect();
    let mut opts = ServerOptions::new(Sources::new(args.dev.clone(), files, args.netns.clone()));
    opts.listen = args.listen;
    opts.token = token(&args)?;
    opts.load_interval = Duration::from_millis(args.load_interval_ms);
    opts.config_interval = Duration::from_millis(args.config_interval_ms);
    let server = Agent::start(opts)?;
    let served = server.devices();
    // The note on stderr before the output a script waits for.
    output::note!(
        "steer agent: serving {} (API v{})",
        server.url(),
        ::agent::API_VERSION
    );
    if json {
        output::json(&serde_json::json!({
            "url": server.url(),
            "token": args.token.is_some() || args.token_file.is_some(),
            "devices": served,
        }))?;
    } else {
        output::table_of(
            &["dev", "addrs", "origin", "queues", "note"],
            served.iter(),
            |e| {
                vec![
                    e.dev.clone().unwrap_or_else(|| "-".into()),
                    e.addrs
                        .iter()
                        .map(IpAddr::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                    e.origin.map_or("-", |o| o.name()).to_string(),
                    e.queues.map_or("-".into(), |q| q.to_string()),
                    e.error.clone().unwrap_or_default(),
                ]
            },
        )?;
    }
    server.wait();
    Ok(exit::OK)
}

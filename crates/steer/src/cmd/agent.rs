//! `steer agent`: serve this host's RSS configs, softirq load and the
//! requester's seen address over HTTP/JSON (crate `agent`, docs/agent.md).

use clap::Args;

use ::agent::listening::Listening;
use ::agent::{Agent, ServeArgs};

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
    #[command(flatten)]
    pub serve: ServeArgs,
}

pub fn run(args: AgentArgs, json: bool) -> anyhow::Result<i32> {
    let server = Agent::start(args.serve.options()?)?;
    // The note on stderr before the output a script waits for.
    output::note!(
        "steer agent: serving {} (API v{})",
        server.url(),
        ::agent::API_VERSION
    );
    output::print(json, &Listening::of(&server, args.serve.has_token()))?;
    server.wait();
    Ok(exit::OK)
}

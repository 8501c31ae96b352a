//! `steer agent`: serve this host's RSS configs, softirq load and the
//! requester's seen address over HTTP/JSON (crate `agent`, docs/agent.md).

use std::net::IpAddr;

use clap::Args;

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
            "token": args.serve.has_token(),
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

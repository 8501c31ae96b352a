//! `steer rss show|where|config`.

use anyhow::bail;
use rss::live::{Channels, DeviceReport, QueueIrq, TcpSocket};
use rss::{
    Endpoint, FlowTuple, HashFieldsByFlow, IndirectionTable, Placement, Predictor, RssConfig,
};
use serde::Serialize;

use crate::cli::{ConfigSource, RssCommand, WhereArgs};
use crate::{exit, output};

pub fn run(cmd: RssCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        RssCommand::Show { dev, netns } => show(dev, netns, json),
        RssCommand::Where(args) if args.sockets => where_sockets(&args.source, json),
        RssCommand::Where(args) => where_flow(&args, json),
        RssCommand::Config(args) => {
            output::json(&args.assumed.config("microsoft")?)?;
            Ok(exit::OK)
        }
    }
}

fn show(dev: Option<String>, netns: Option<String>, json: bool) -> anyhow::Result<i32> {
    let reports = rss::live::inspect_in(netns.as_deref(), dev.as_deref())?;
    if json {
        output::json(&reports)?;
        return Ok(exit::OK);
    }
    for (i, report) in reports.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print_report(report)?;
    }
    Ok(exit::OK)
}

fn print_report(r: &DeviceReport) -> anyhow::Result<()> {
    let driver = r.driver.as_deref().unwrap_or("unknown driver");
    println!("{} (ifindex {}, {driver})", r.dev, r.ifindex);
    let mut rows: Vec<(&str, String)> = Vec::new();
    if let Some(c) = &r.channels {
        rows.push(("channels", channels_summary(c)));
    }
    match &r.rss {
        Some(cfg) => {
            let source = r.source.as_deref().unwrap_or("?");
            rows.push(("hash", format!("{} ({source})", cfg.hash_function.name())));
            rows.push(("input transform", format!("{:?}", cfg.input_transform)));
            rows.push(("key", format!("{} ({} bytes)", cfg.key, cfg.key.len())));
            rows.push(("hashed fields", fields_summary(&cfg.fields)));
            rows.push(("indirection", table_summary(&cfg.indirection_table)));
            rows.push(("queue -> cpu", queue_cpus_summary(&cfg.queue_cpus)));
        }
        None => rows.push(("rss", "none".into())),
    }
    for irq in &r.queue_irqs {
        rows.push(("queue irq", irq_summary(irq)));
    }
    for (q, cpus) in r.rps_cpus.iter().enumerate() {
        if !cpus.is_empty() {
            rows.push(("rps", format!("rx-{q} -> cpus {cpus:?}")));
        }
    }
    if let Some(key) = &r.netdev_rss_key {
        rows.push(("netdev_rss_key", key.to_string()));
    }
    for lack in &r.lacks {
        rows.push(("lacks", lack.clone()));
    }
    for note in &r.notes {
        rows.push(("note", note.clone()));
    }
    output::rows(&rows)
}

fn channels_summary(c: &Channels) -> String {
    let kinds = [
        ("rx", c.rx),
        ("tx", c.tx),
        ("other", c.other),
        ("combined", c.combined),
    ];
    let parts: Vec<String> = kinds
        .iter()
        .filter_map(|(name, count)| count.map(|n| format!("{name} {} (max {})", n.current, n.max)))
        .collect();
    parts.join(", ")
}

fn irq_summary(irq: &QueueIrq) -> String {
    let effective = if irq.effective_cpus.is_empty() {
        String::new()
    } else {
        format!(", runs on {:?}", irq.effective_cpus)
    };
    format!(
        "queue {} irq {} ({}) affinity {:?}{effective}",
        irq.queue, irq.irq, irq.name, irq.cpus
    )
}

fn fields_summary(f: &HashFieldsByFlow) -> String {
    rss::FlowType::ALL
        .iter()
        .map(|&flow| format!("{} {}", flow.name(), f.get(flow).ethtool_letters()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn table_summary(t: &IndirectionTable) -> String {
    let shares: Vec<String> = t
        .entries_per_queue()
        .iter()
        .map(|(q, n)| format!("q{q}:{n}"))
        .collect();
    format!("{} entries ({})", t.len(), shares.join(" "))
}

fn queue_cpus_summary(cpus: &[u32]) -> String {
    let parts: Vec<String> = cpus
        .iter()
        .enumerate()
        .map(|(q, c)| format!("{q}->{c}"))
        .collect();
    parts.join(" ")
}

/// The config named by `--config`, `--dev` or `--key`.
pub fn load_config(source: &ConfigSource) -> anyhow::Result<RssConfig> {
    if let Some(path) = &source.config {
        return Ok(RssConfig::from_file(path)?);
    }
    if let Some(dev) = &source.dev {
        return Ok(nic::device_config(dev, source.netns.as_deref())?.1);
    }
    if source.assumed.key.is_some() {
        return Ok(source.assumed.config("microsoft")?);
    }
    bail!("say where the RSS config comes from: --config FILE, --dev DEV, or --key KEY --queues N")
}

#[derive(Serialize)]
struct WhereResult {
    flow: FlowTuple,
    /// "0x" and 8 hex digits.
    hash: String,
    index: usize,
    table_size: usize,
    queue: u32,
    cpu: u32,
    hashed_bytes: String,
}

fn placement_row(config: &RssConfig, flow: FlowTuple, p: Placement) -> anyhow::Result<WhereResult> {
    Ok(WhereResult {
        flow,
        hash: format!("{:#010x}", p.hash),
        index: p.index,
        table_size: config.indirection_table.len(),
        queue: p.queue,
        cpu: p.cpu,
        hashed_bytes: hex_string(config.hash_input(&flow)?.as_bytes()),
    })
}

fn hex_string(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn where_flow(args: &WhereArgs, json: bool) -> anyhow::Result<i32> {
    let (Some(src), Some(dst)) = (&args.src, &args.dst) else {
        bail!("give SRC and DST, or --sockets");
    };
    let src: Endpoint = src.parse()?;
    let dst: Endpoint = dst.parse()?;
    let flow = Endpoint::flow(src, dst, args.proto)?;
    let config = load_config(&args.source)?;
    let placement = config.place(&flow)?;
    let result = placement_row(&config, flow, placement)?;
    if json {
        output::json(&result)?;
        return Ok(exit::OK);
    }
    output::rows(&[
        ("flow", output::flow(&flow)),
        (
            "hashed",
            format!(
                "{} ({} bytes)",
                result.hashed_bytes,
                result.hashed_bytes.len() / 2
            ),
        ),
        ("hash", result.hash.clone()),
        (
            "index",
            format!("{} of {}", result.index, result.table_size),
        ),
        ("queue", result.queue.to_string()),
        ("cpu", result.cpu.to_string()),
    ])?;
    Ok(exit::OK)
}

#[derive(Serialize)]
struct SocketRow {
    socket: TcpSocket,
    #[serde(flatten)]
    placement: WhereResult,
    busy: bool,
    /// Another busy flow lands on the same CPU.
    shares_cpu: bool,
}

fn where_sockets(source: &ConfigSource, json: bool) -> anyhow::Result<i32> {
    let predictor = Predictor::new(load_config(source)?)?;
    let placed = rss::live::place_sockets(&predictor, rss::live::tcp_sockets()?);
    let mut rows = Vec::with_capacity(placed.len());
    for p in placed {
        rows.push(SocketRow {
            placement: placement_row(predictor.config(), p.flow, p.placement)?,
            socket: p.socket,
            busy: p.busy,
            shares_cpu: p.shares_cpu,
        });
    }
    if json {
        output::json(&rows)?;
        return Ok(exit::OK);
    }
    output::table_of(
        &["remote", "local", "hash", "queue", "cpu", "rx bytes", ""],
        rows.iter(),
        |r| {
            vec![
                r.socket.remote.to_string(),
                r.socket.local.to_string(),
                r.placement.hash.clone(),
                r.placement.queue.to_string(),
                r.placement.cpu.to_string(),
                r.socket
                    .bytes_received
                    .map_or("?".into(), |b| b.to_string()),
                if r.shares_cpu { "SHARED CPU" } else { "" }.into(),
            ]
        },
    )?;
    Ok(exit::OK)
}

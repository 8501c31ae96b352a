//! Software RSS for devices without it (veth, single-queue virtio).
//!
//! An XDP program (`src/bpf/softrss.bpf.c`) hashes each frame with Toeplitz
//! exactly as [`rss::RssConfig`] says (same fields per flow type, same input
//! transform, same key tables as [`rss::ToeplitzTable`]), picks the
//! indirection entry `hash % table size`, counts the frame for its queue and
//! hands it to the queue's CPU through a cpumap. So [`rss::Predictor`]'s
//! answer for a flow is where the flow's packets are counted and processed.
//!
//! The attachment outlives the process: the program is attached with netlink
//! (not a process-owned bpf_link) and its maps are pinned under
//! `/sys/fs/bpf/steer/<netns or root>/<dev>/`; the applied config is kept in
//! `/run/steer/nic/<netns or root>/<dev>.json`. So `stats`, `update` and
//! `detach` work from later invocations.
//!
//! # API
//!
//! ```text
//! pub struct AttachOptions { pub track_flows: bool, pub queue_size: u32, pub same_cpu_pass: bool }
//!     // Default: false, 2048, false (construct with ..Default::default())
//! pub fn attach(dev, netns: Option<&str>, config: &RssConfig, opts: &AttachOptions) -> Result<(), NicError>
//! pub fn update(dev, netns, config: &RssConfig) -> Result<(), NicError>
//! pub fn detach(dev, netns) -> Result<(), NicError>
//! pub fn attached_config(dev, netns) -> Result<Option<RssConfig>, NicError>
//! pub fn device_config(dev, netns) -> Result<(ConfigSource, RssConfig), NicError> // software RSS, else the NIC's
//! pub fn stats(dev, netns) -> Result<NicStats, NicError>
//! pub fn reset_stats(dev, netns) -> Result<(), NicError>
//! pub fn flows(dev, netns) -> Result<Vec<FlowStats>, NicError>
//! pub fn clear_flows(dev, netns) -> Result<(), NicError>
//! // what the commands report: Change::{attached, updated, detached} (Display: one line), TrackedFlows
//! // a device's config as flags name it: LocalConfigArgs { config, dev, netns, assumed }.load()
//! // helpers: nic::offload::{check_peer, veth_peer}
//! pub fn load_program(open_skeleton, program, needs) -> Result<Skel, NicError> // also lbxdp's and binder's
//! ```
//!
//! `netns` is a name under `/run/netns` (`ip netns add NAME`); `None` is the
//! caller's namespace ("root" in paths); the work runs there through
//! [`host::netns::run_in`]. Every operation validates its input
//! before touching the device: on an error nothing is attached or changed.
//!
//! # Datapath semantics (what the counters mean)
//!
//! - Ethernet with up to two VLAN tags; IPv4 (any IHL) and IPv6 (skipping up
//!   to three hop-by-hop/routing/destination-options headers).
//! - TCP and UDP hash the fields configured for tcp4/udp4/tcp6/udp6; IPv4
//!   fragments, IPv6 fragment headers, other protocols and L4 headers cut
//!   short hash the two addresses (rss::L4Proto::Other).
//! - Non-IP frames (ARP, LLDP, truncated IP headers) pass on the current CPU
//!   and are counted in `non_ip_packets`, not in a queue.
//! - Byte counts are whole Ethernet frames.
//! - `NicStats::cpumap` is the kernel's own account of the redirected frames
//!   per delivery CPU (the `xdp_cpumap_enqueue` and `xdp_cpumap_kthread`
//!   tracepoints, counted for this attachment's cpumap only): frames
//!   enqueued, dropped because the CPU's queue (`queue_size`) was full, and
//!   dropped by its kthread. A redirected frame lost anywhere after the
//!   program shows up there.
//!
//! # The veth checksum pitfall
//!
//! [`attach`] fails with [`NicError::PeerChecksumOffload`] when `dev` is a veth
//! whose peer transmits with tx checksum offload on: those frames would reach
//! TCP with unfilled checksums after the cpumap (see [`offload`]). The fix is
//! in the error: `ethtool -K PEER tx off`.

mod config_args;
pub mod error;
mod loader;
pub mod offload;
pub mod report;
pub mod state;
pub mod sys;

use serde::Serialize;

pub use config_args::LocalConfigArgs;
pub use error::NicError;
pub use loader::{load_program, MAX_CPUMAP_QSIZE, MAX_FLOWS, MAX_QUEUES, MAX_TABLE};
pub use report::{Action, Change, TrackedFlows};

/// How to attach. On a command line (feature `clap`, `steer nic attach`)
/// only `--track-flows` is offered; the rest keep their defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct AttachOptions {
    /// Also count packets per flow (for `steer nic flows`: an LRU table of
    /// nic::MAX_FLOWS entries; costs a hash-map update per packet).
    /// Default: off.
    #[cfg_attr(feature = "clap", arg(long))]
    pub track_flows: bool,
    /// Frames buffered per destination CPU in the cpumap (1..=16384).
    #[cfg_attr(feature = "clap", arg(skip = AttachOptions::default().queue_size))]
    pub queue_size: u32,
    /// Pass a frame up on the CPU running the program when that is its
    /// queue's CPU, instead of going through the cpumap. Same placement,
    /// less work per frame, but TCP flows see reordering when the sender
    /// migrates between CPUs (docs/performance.md). Default off.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub same_cpu_pass: bool,
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions {
            track_flows: false,
            queue_size: 2048,
            same_cpu_pass: false,
        }
    }
}

/// Counters of one software receive queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    pub queue: u32,
    /// The CPU the queue is delivered to.
    pub cpu: u32,
    pub packets: u64,
    /// Ethernet frame bytes.
    pub bytes: u64,
}

/// Counters per delivery CPU (the sum of its queues).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuStats {
    pub cpu: u32,
    pub packets: u64,
    pub bytes: u64,
}

/// What the cpumap did with the frames for one delivery CPU, from the
/// kernel's cpumap tracepoints (`xdp_cpumap_enqueue`, `xdp_cpumap_kthread`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpumapStats {
    pub cpu: u32,
    /// Frames flushed towards the CPU's cpumap ring.
    pub enqueued: u64,
    /// Of those, dropped because the ring (the cpumap queue size) was full.
    pub enqueue_drops: u64,
    /// Frames the CPU's cpumap kthread handed to the stack.
    pub kthread_processed: u64,
    /// Frames the kthread dropped (no skb could be built).
    pub kthread_drops: u64,
}

/// The datapath counters of one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NicStats {
    pub dev: String,
    pub queues: Vec<QueueStats>,
    pub cpus: Vec<CpuStats>,
    /// The cpumap's counters per delivery CPU: where redirected frames were
    /// lost between the program and the CPU's stack.
    pub cpumap: Vec<CpumapStats>,
    /// Frames that were not IPv4/IPv6, passed on the receiving CPU.
    pub non_ip_packets: u64,
}

/// One flow seen by the datapath (with [`AttachOptions::track_flows`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlowStats {
    /// As parsed from the packets, before the input transform; ports are 0
    /// for flows hashed as a 2-tuple.
    pub tuple: rss::FlowTuple,
    pub queue: u32,
    pub packets: u64,
    pub bytes: u64,
}

fn not_attached(dev: &str, netns: Option<&str>) -> NicError {
    NicError::NotAttached {
        dev: dev.to_string(),
        netns: netns.map(str::to_string),
    }
}

fn no_device(dev: &str, netns: Option<&str>) -> NicError {
    NicError::NoSuchDevice {
        dev: dev.to_string(),
        netns: netns.map(str::to_string),
    }
}

/// An attachment found on the device: the pinned program is the one running.
struct Attached {
    ifindex: u32,
    prog: std::os::fd::OwnedFd,
}

/// In the device's namespace: Steer's attachment of `dev`, if it is running.
fn find_attached(dev: &str, netns: Option<&str>) -> Result<Option<Attached>, NicError> {
    let ifindex = sys::ifindex(dev).ok_or_else(|| no_device(dev, netns))?;
    let Some((prog, id)) = loader::pinned_prog(&state::pin_dir(dev, netns)) else {
        return Ok(None);
    };
    let running = loader::attached_prog_id(ifindex)?;
    Ok((running == id && id != 0).then_some(Attached { ifindex, prog }))
}

/// Owned copies of the arguments, for the namespace thread.
fn owned(dev: &str, netns: Option<&str>) -> (String, Option<String>) {
    (dev.to_string(), netns.map(str::to_string))
}

/// Attaches the software RSS to `dev`, replacing Steer's previous attachment
/// there (atomically) if there is one. Fails if another XDP program runs on
/// the device.
pub fn attach(
    dev: &str,
    netns: Option<&str>,
    config: &rss::RssConfig,
    opts: &AttachOptions,
) -> Result<(), NicError> {
    state::check_names(dev, netns)?;
    let mut plan = loader::plan(
        config,
        opts.track_flows,
        opts.queue_size,
        loader::possible_cpus()?,
    )?;
    plan.config.same_cpu_pass = u32::from(opts.same_cpu_pass);
    host::require_root("attach the software RSS")?;
    sys::ensure_bpffs(std::path::Path::new(state::BPFFS))
        .map_err(|e| NicError::io("mount bpffs at /sys/fs/bpf", e))?;
    {
        let (d, n) = owned(dev, netns);
        host::netns::run_in(netns, move || {
            sys::ifindex(&d)
                .map(|_| ())
                .ok_or_else(|| no_device(&d, n.as_deref()))
        })??;
    }
    offload::check_peer(dev, netns)?;
    let (d, n) = owned(dev, netns);
    let config = config.clone();
    host::netns::run_in(netns, move || {
        let (dev, netns) = (d.as_str(), n.as_deref());
        let ifindex = sys::ifindex(dev).ok_or_else(|| no_device(dev, netns))?;
        let dir = state::pin_dir(dev, netns);
        let ours = loader::pinned_prog(&dir);
        let running = loader::attached_prog_id(ifindex)?;
        let old = match ours {
            Some((fd, id)) if id == running && running != 0 => Some(fd),
            _ if running != 0 => {
                return Err(NicError::ForeignProgram {
                    dev: dev.to_string(),
                    prog_id: running,
                })
            }
            _ => None,
        };
        if old.is_none() {
            // Stale pins of an attachment that is gone (device recreated,
            // program detached by hand).
            state::remove(dev, netns)?;
        }
        loader::load_and_attach(&mut plan, ifindex, old.as_ref(), &dir)?;
        state::write_config(dev, netns, &config)
    })?
}

/// Changes key, fields, transform, indirection table and queue CPUs of a
/// running attachment, without detaching. Counters are kept.
pub fn update(dev: &str, netns: Option<&str>, config: &rss::RssConfig) -> Result<(), NicError> {
    state::check_names(dev, netns)?;
    // Validate the config on its own first (bad input is exit 2 even when the
    // device is not attached).
    loader::plan(config, false, 1, loader::possible_cpus()?)?;
    host::require_root("update the software RSS")?;
    let (d, n) = owned(dev, netns);
    let config = config.clone();
    host::netns::run_in(netns, move || {
        let (dev, netns) = (d.as_str(), n.as_deref());
        find_attached(dev, netns)?.ok_or_else(|| not_attached(dev, netns))?;
        let maps = loader::Maps::open_pinned(&state::pin_dir(dev, netns))?;
        let current = maps.datapath_config()?;
        let mut plan = loader::plan(
            &config,
            current.track_flows != 0,
            current.cpumap_qsize,
            loader::possible_cpus()?,
        )?;
        plan.config.same_cpu_pass = current.same_cpu_pass;
        plan.config.cpumap_id = current.cpumap_id;
        maps.write(&plan)?;
        state::write_config(dev, netns, &config)
    })?
}

/// Detaches Steer's software RSS from `dev` and removes its pins and config
/// file. Stale pins of an attachment that no longer runs are removed too,
/// and then [`NicError::NotAttached`] (or `NoSuchDevice`) is returned.
pub fn detach(dev: &str, netns: Option<&str>) -> Result<(), NicError> {
    state::check_names(dev, netns)?;
    host::require_root("detach the software RSS")?;
    let (d, n) = owned(dev, netns);
    let found = host::netns::run_in(netns, move || {
        let (dev, netns) = (d.as_str(), n.as_deref());
        match find_attached(dev, netns) {
            Ok(Some(a)) => {
                loader::detach(a.ifindex, &a.prog)?;
                Ok::<_, NicError>(Ok(()))
            }
            Ok(None) => Ok(Err(not_attached(dev, netns))),
            Err(e) => Ok(Err(e)),
        }
    });
    let found = match found {
        Err(host::HostError::NoSuchNetns { .. }) => Err(not_attached(dev, netns)),
        Err(e) => return Err(e.into()),
        Ok(r) => r?,
    };
    state::remove(dev, netns)?;
    found
}

/// The config applied to `dev`, or `None` if Steer's software RSS does not
/// run there.
pub fn attached_config(dev: &str, netns: Option<&str>) -> Result<Option<rss::RssConfig>, NicError> {
    state::check_names(dev, netns)?;
    let (d, n) = owned(dev, netns);
    host::netns::run_in(netns, move || {
        let (dev, netns) = (d.as_str(), n.as_deref());
        if find_attached(dev, netns)?.is_none() {
            return Ok(None);
        }
        state::read_config(dev, netns)
    })?
}

/// Where the config that places a device's flows comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// Steer's software RSS attached to the device ([`attached_config`]).
    SoftwareRss,
    /// The NIC's own RSS, read over ethtool netlink (`rss::live::read_config`).
    Nic,
}

/// The config that places `dev`'s flows on queues: Steer's software RSS
/// when it is attached, else the NIC's own RSS.
///
/// One policy for every caller: attached software RSS whose state cannot
/// be read is an error, never replaced by the NIC's config, because with
/// the XDP program attached the NIC's indirection table is not what steers
/// the flows (a config that could not be read is absent, not a stand-in).
pub fn device_config(
    dev: &str,
    netns: Option<&str>,
) -> Result<(ConfigSource, rss::RssConfig), NicError> {
    if let Some(config) = attached_config(dev, netns)? {
        return Ok((ConfigSource::SoftwareRss, config));
    }
    let dev = dev.to_string();
    let config = host::netns::run_in(netns, move || rss::live::read_config(&dev))??;
    Ok((ConfigSource::Nic, config))
}

/// Reads the counters of a running attachment.
fn with_maps<T: Send + 'static>(
    dev: &str,
    netns: Option<&str>,
    f: impl FnOnce(&str, loader::Maps, rss::RssConfig) -> Result<T, NicError> + Send + 'static,
) -> Result<T, NicError> {
    state::check_names(dev, netns)?;
    host::require_root("read the software RSS maps")?;
    let (d, n) = owned(dev, netns);
    host::netns::run_in(netns, move || {
        let (dev, netns) = (d.as_str(), n.as_deref());
        find_attached(dev, netns)?.ok_or_else(|| not_attached(dev, netns))?;
        let config = state::read_config(dev, netns)?.ok_or_else(|| NicError::State {
            path: state::config_path(dev, netns).display().to_string(),
            reason: "missing".into(),
        })?;
        let maps = loader::Maps::open_pinned(&state::pin_dir(dev, netns))?;
        f(dev, maps, config)
    })?
}

/// Per-queue and per-CPU counters of `dev`.
pub fn stats(dev: &str, netns: Option<&str>) -> Result<NicStats, NicError> {
    with_maps(dev, netns, |dev, maps, config| {
        let counters = maps.queue_counters(config.queues)?;
        let queues: Vec<QueueStats> = counters
            .iter()
            .enumerate()
            .map(|(q, c)| QueueStats {
                queue: q as u32,
                cpu: config.queue_cpus.get(q).copied().unwrap_or(q as u32),
                packets: c.packets,
                bytes: c.bytes,
            })
            .collect();
        let mut cpus: Vec<CpuStats> = config
            .cpus()
            .into_iter()
            .map(|cpu| CpuStats {
                cpu,
                packets: 0,
                bytes: 0,
            })
            .collect();
        for q in &queues {
            if let Some(c) = cpus.iter_mut().find(|c| c.cpu == q.cpu) {
                c.packets += q.packets;
                c.bytes += q.bytes;
            }
        }
        let cpumap = config
            .cpus()
            .into_iter()
            .map(|cpu| {
                let c = maps.cpumap_counters(cpu)?;
                Ok(CpumapStats {
                    cpu,
                    enqueued: c.enqueued,
                    enqueue_drops: c.enqueue_drops,
                    kthread_processed: c.kthread_processed,
                    kthread_drops: c.kthread_drops,
                })
            })
            .collect::<Result<_, NicError>>()?;
        Ok(NicStats {
            dev: dev.to_string(),
            queues,
            cpus,
            cpumap,
            non_ip_packets: maps.non_ip_counters()?.packets,
        })
    })
}

/// Zeroes the queue, non-IP and cpumap counters.
pub fn reset_stats(dev: &str, netns: Option<&str>) -> Result<(), NicError> {
    with_maps(dev, netns, |_, maps, _| maps.reset_counters())
}

fn tracked(dev: &str, maps: &loader::Maps) -> Result<(), NicError> {
    if maps.datapath_config()?.track_flows == 0 {
        return Err(NicError::FlowsNotTracked {
            dev: dev.to_string(),
        });
    }
    Ok(())
}

/// The flows the datapath has seen (needs [`AttachOptions::track_flows`]),
/// sorted by queue, then by tuple.
pub fn flows(dev: &str, netns: Option<&str>) -> Result<Vec<FlowStats>, NicError> {
    with_maps(dev, netns, |dev, maps, _| {
        tracked(dev, &maps)?;
        let mut out: Vec<FlowStats> = maps
            .flows()?
            .into_iter()
            .map(|(tuple, v)| FlowStats {
                tuple,
                queue: v.queue,
                packets: v.packets,
                bytes: v.bytes,
            })
            .collect();
        out.sort_by_key(|f| {
            (
                f.queue,
                f.tuple.src,
                f.tuple.src_port,
                f.tuple.dst,
                f.tuple.dst_port,
            )
        });
        Ok(out)
    })
}

/// Empties the flow table.
pub fn clear_flows(dev: &str, netns: Option<&str>) -> Result<(), NicError> {
    with_maps(dev, netns, |dev, maps, _| {
        tracked(dev, &maps)?;
        maps.clear_flows()
    })
}

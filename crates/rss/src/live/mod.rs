//! Reading a live device's RSS configuration from the kernel (feature `live`).
//!
//! [`inspect`] gathers everything the kernel tells about where a device's
//! received packets go, and builds an [`RssConfig`] from it when the device
//! has RSS:
//!
//! | part | source |
//! |---|---|
//! | hash function, key, input transform, indirection table | ethtool netlink `ETHTOOL_MSG_RSS_GET` ([`ethtool_nl`]), else the `ETHTOOL_GRSSH` ioctl ([`sys`]) |
//! | receive queue count | ethtool netlink `ETHTOOL_MSG_CHANNELS_GET` |
//! | hashed fields per flow type | `ETHTOOL_GRXFH` ioctl |
//! | queue -> CPU | queue IRQs in /proc/interrupts ([`irq`]), their /proc/irq/N affinity |
//! | RPS | /sys/class/net/DEV/queues/rx-N/rps_cpus |
//!
//! Nothing is guessed silently: what the device lacks is stated in
//! [`DeviceReport::lacks`], every assumption in [`DeviceReport::notes`], and
//! [`read_config`] is an error for a device without RSS.
//!
//! All `unsafe` code is in [`sys`].

#![deny(unsafe_code)]

pub mod attr;
mod error;
pub mod ethtool_nl;
pub mod files;
pub mod irq;
pub mod netlink;
pub mod placement;
mod sockets;
#[allow(unsafe_code)]
mod sys;
mod text;

use netlink_sys::protocols::NETLINK_GENERIC;
use serde::Serialize;

use crate::config::{HashFunction, InputTransform, RssConfig, CONFIG_VERSION};
use crate::fields::{FlowType, HashFields, HashFieldsByFlow};
use crate::indirection::IndirectionTable;
use crate::key::RssKey;

pub use attr::AttrError;
pub use error::LiveError;
pub use ethtool_nl::{ChannelCount, Channels};
pub use files::Roots;
pub use irq::QueueIrq;
pub use placement::{place_sockets, socket_rows, SocketPlacement, SocketRow, SocketRows};
pub use sockets::{tcp_sockets, SockDiag, TcpSocket};

use ethtool_nl::{EthtoolMessage, RssReply};
use host::netlink::{NlFailure, NlSocket};
use netlink::IntoLive;

/// Everything the kernel reports about one device's receive steering.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceReport {
    pub dev: String,
    pub ifindex: u32,
    /// Driver name (`ethtool -i`), None when the kernel reports none (lo).
    pub driver: Option<String>,
    /// None when the driver has no channel API.
    pub channels: Option<Channels>,
    /// None when the device has no RSS (see `lacks`).
    pub rss: Option<RssConfig>,
    /// Which API answered for RSS: `"ethtool-netlink"` or `"ioctl"`.
    pub source: Option<String>,
    /// Plain statements of what the device lacks.
    pub lacks: Vec<String>,
    /// The receive queues' interrupts.
    pub queue_irqs: Vec<QueueIrq>,
    /// RPS CPUs per receive queue (index = queue; empty list = RPS off).
    pub rps_cpus: Vec<Vec<u32>>,
    /// `/proc/sys/net/core/netdev_rss_key`, the key Linux gives drivers that
    /// take the default (None if absent or not yet initialised).
    pub netdev_rss_key: Option<RssKey>,
    /// Assumptions made and anything else worth knowing.
    pub notes: Vec<String>,
}

/// The reports of several devices (`steer rss show`); JSON: the list
/// itself.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct DeviceReports(pub Vec<DeviceReport>);

/// How [`inspect_with`] reads a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectOptions {
    /// Where /proc and /sys are.
    pub roots: Roots,
    /// Ask ethtool netlink first (true), or use only the ioctls (false: what
    /// happens on kernels without `ETHTOOL_MSG_RSS_GET`).
    pub netlink: bool,
}

impl Default for InspectOptions {
    fn default() -> Self {
        InspectOptions {
            roots: Roots::default(),
            netlink: true,
        }
    }
}

/// Reads everything about `dev` (see the module documentation).
pub fn inspect(dev: &str) -> Result<DeviceReport, LiveError> {
    inspect_with(dev, &InspectOptions::default())
}

/// Reads `dev`, or every device when `None`, in network namespace `netns`
/// (a name under /run/netns; the caller's namespace when `None`): what
/// `steer rss show` prints.
///
/// In another namespace, /sys is that namespace's own (`host::sysfs`), so
/// its devices' RPS masks and bus are read too; the host's /sys would show
/// the host's devices instead.
pub fn inspect_in(netns: Option<&str>, dev: Option<&str>) -> Result<Vec<DeviceReport>, LiveError> {
    let sysfs = netns.map(host::sysfs::Sysfs::of).transpose()?;
    let mut options = InspectOptions::default();
    if let Some(sysfs) = &sysfs {
        options.roots.sys = sysfs.path("");
    }
    let dev = dev.map(str::to_string);
    host::netns::run_in(netns, move || match dev {
        Some(dev) => Ok(vec![inspect_with(&dev, &options)?]),
        None => list_devices()?
            .iter()
            .map(|d| inspect_with(d, &options))
            .collect(),
    })?
}

/// The network devices of the calling thread's network namespace.
pub fn list_devices() -> Result<Vec<String>, LiveError> {
    sys::interface_names().map_err(|source| LiveError::Kernel {
        what: "listing network devices".into(),
        source,
    })
}

/// The device's RSS configuration; an error (never a guess) when the device
/// has no RSS ([`LiveError::NoRss`], listing what it lacks).
pub fn read_config(dev: &str) -> Result<RssConfig, LiveError> {
    let report = inspect(dev)?;
    report.rss.ok_or_else(|| LiveError::NoRss {
        dev: dev.to_string(),
        reason: if report.lacks.is_empty() {
            "the kernel reported no RSS configuration".to_string()
        } else {
            report.lacks.join("; ")
        },
    })
}

/// The kernel's rules for a device name (net/core/dev.c dev_valid_name).
fn check_name(dev: &str) -> Result<(), LiveError> {
    let reason = if dev.is_empty() {
        Some("the name is empty")
    } else if dev.len() >= 16 {
        Some("names are at most 15 bytes")
    } else if dev == "." || dev == ".." {
        Some("'.' and '..' are not device names")
    } else if dev
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace() || c == '\0')
    {
        Some("names contain no '/', ':', NUL or whitespace")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(LiveError::InvalidDeviceName {
            dev: dev.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// The RSS parts, whichever API reported them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RssParts {
    /// `ETH_RSS_HASH_*` bitmask (0: not reported).
    hfunc: u32,
    indir: Vec<u32>,
    key: Vec<u8>,
    /// `RXH_XFRM_*` bitmask.
    input_xfrm: u32,
}

impl From<RssReply> for RssParts {
    fn from(r: RssReply) -> Self {
        RssParts {
            hfunc: r.hfunc.unwrap_or(0),
            indir: r.indir,
            key: r.hkey,
            input_xfrm: r.input_xfrm.unwrap_or(0),
        }
    }
}

impl From<sys::Rxfh> for RssParts {
    fn from(r: sys::Rxfh) -> Self {
        RssParts {
            hfunc: u32::from(r.hfunc),
            indir: r.indir,
            key: r.key,
            input_xfrm: u32::from(r.input_xfrm),
        }
    }
}

/// Flow types of `ETHTOOL_GRXFH` (include/uapi/linux/ethtool.h).
const TCP_V4_FLOW: u32 = 0x01;
const UDP_V4_FLOW: u32 = 0x02;
const TCP_V6_FLOW: u32 = 0x05;
const UDP_V6_FLOW: u32 = 0x06;
/// `RXH_*` bits of the hashed-fields word.
const RXH_L2DA: u64 = 1 << 1;
const RXH_VLAN: u64 = 1 << 2;
const RXH_L3_PROTO: u64 = 1 << 3;
const RXH_IP_SRC: u64 = 1 << 4;
const RXH_IP_DST: u64 = 1 << 5;
const RXH_L4_B_0_1: u64 = 1 << 6;
const RXH_L4_B_2_3: u64 = 1 << 7;
const RXH_DISCARD: u64 = 1 << 31;

fn flow_type_code(flow: FlowType) -> u32 {
    match flow {
        FlowType::Tcp4 => TCP_V4_FLOW,
        FlowType::Udp4 => UDP_V4_FLOW,
        FlowType::Tcp6 => TCP_V6_FLOW,
        FlowType::Udp6 => UDP_V6_FLOW,
    }
}

/// `RXH_*` bits -> the fields Steer models, plus a note for bits it does not.
fn fields_from_rxh(flow: FlowType, bits: u64, notes: &mut Vec<String>) -> HashFields {
    if bits & RXH_DISCARD != 0 {
        notes.push(format!(
            "{} traffic is discarded by the device (RXH_DISCARD)",
            flow.name()
        ));
    }
    let extra: Vec<&str> = [
        (RXH_L2DA, "destination MAC"),
        (RXH_VLAN, "VLAN tag"),
        (RXH_L3_PROTO, "L3 protocol"),
    ]
    .iter()
    .filter(|(bit, _)| bits & bit != 0)
    .map(|(_, name)| *name)
    .collect();
    if !extra.is_empty() {
        notes.push(format!(
            "{} also hashes {}, which Steer does not model: predictions for it may be wrong",
            flow.name(),
            extra.join(", ")
        ));
    }
    HashFields {
        src_ip: bits & RXH_IP_SRC != 0,
        dst_ip: bits & RXH_IP_DST != 0,
        src_port: bits & RXH_L4_B_0_1 != 0,
        dst_port: bits & RXH_L4_B_2_3 != 0,
    }
}

/// Everything read from the kernel and the files, before a config is built.
#[derive(Debug, Clone, Default)]
struct Gathered {
    driver: Option<String>,
    channels: Option<Channels>,
    rss: Option<RssParts>,
    /// `ETHTOOL_GRXFH` result per flow type (`Err`: why it failed).
    fields: Vec<(FlowType, Result<u64, String>)>,
    queue_irqs: Vec<QueueIrq>,
    rps_cpus: Vec<Vec<u32>>,
    online_cpus: u32,
}

impl Gathered {
    /// "the driver (veth)", or "the device (no driver reported)" for lo.
    fn driver_phrase(&self) -> String {
        match &self.driver {
            Some(d) => format!("the driver ({d})"),
            None => "the device (no driver reported)".to_string(),
        }
    }
}

/// The result of building a config: the config, or what the device lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Built {
    Config(RssConfig),
    Lacks(String),
}

/// Builds the [`RssConfig`] from the gathered parts (pure; unit-tested).
fn build_config(g: &Gathered, notes: &mut Vec<String>) -> Result<Built, LiveError> {
    let driver = g.driver_phrase();
    let Some(parts) = &g.rss else {
        return Ok(Built::Lacks(format!(
            "no RSS: {driver} implements no RSS hash or indirection table"
        )));
    };
    match (parts.indir.is_empty(), parts.key.is_empty()) {
        (true, true) => {
            return Ok(Built::Lacks(format!(
                "no RSS: {driver} reports no indirection table and no hash key"
            )))
        }
        (true, false) => {
            return Ok(Built::Lacks(format!(
                "no RSS indirection table: {driver} reports a hash key but no table"
            )))
        }
        (false, true) => {
            return Ok(Built::Lacks(format!(
                "no RSS hash key: {driver} reports an indirection table but no key"
            )))
        }
        (false, false) => {}
    }
    let hash_function = match parts.hfunc {
        0 => {
            notes.push("the driver does not report its hash function; assuming Toeplitz".into());
            HashFunction::Toeplitz
        }
        ethtool_nl::ETH_RSS_HASH_TOP => HashFunction::Toeplitz,
        ethtool_nl::ETH_RSS_HASH_XOR => HashFunction::Xor,
        ethtool_nl::ETH_RSS_HASH_CRC32 => HashFunction::Crc32,
        other => {
            return Ok(Built::Lacks(format!(
                "no known RSS hash function: {driver} reports hash function bits {other:#x}"
            )))
        }
    };
    let input_transform = match parts.input_xfrm {
        0 => InputTransform::None,
        ethtool_nl::RXH_XFRM_SYM_XOR => InputTransform::SymXor,
        ethtool_nl::RXH_XFRM_SYM_OR_XOR => InputTransform::SymOrXor,
        other => {
            return Ok(Built::Lacks(format!(
                "no known RSS input transform: {driver} reports input_xfrm bits {other:#x}"
            )))
        }
    };
    let key = RssKey::new(parts.key.clone())?;
    let indirection_table = IndirectionTable::from_entries(parts.indir.clone())?;

    let mut fields = HashFieldsByFlow::linux_default();
    let mut unknown = Vec::new();
    for flow in FlowType::ALL {
        match g.fields.iter().find(|(f, _)| *f == flow).map(|(_, r)| r) {
            Some(Ok(bits)) => fields.set(flow, fields_from_rxh(flow, *bits, notes)),
            Some(Err(e)) => unknown.push(format!("{} ({e})", flow.name())),
            None => unknown.push(format!("{} (not read)", flow.name())),
        }
    }
    if !unknown.is_empty() {
        notes.push(format!(
            "hashed fields unknown for {}: assuming the Linux default (TCP 4-tuple, UDP addresses only)",
            unknown.join(", ")
        ));
    }

    let table_queues = indirection_table.queues_used();
    let channel_queues = g.channels.map_or(0, |c| c.rx_queues());
    let queues = if channel_queues == 0 {
        notes.push(format!(
            "receive queue count not reported by the driver: using the indirection table's highest queue + 1 = {table_queues}"
        ));
        table_queues
    } else if table_queues > channel_queues {
        notes.push(format!(
            "the indirection table names queue {} but the device reports {channel_queues} receive channels: using {table_queues} queues",
            table_queues - 1
        ));
        table_queues
    } else {
        channel_queues
    };

    let online = g.online_cpus.max(1);
    let mut assumed = Vec::new();
    let queue_cpus: Vec<u32> = (0..queues)
        .map(|q| {
            match g
                .queue_irqs
                .iter()
                .find(|i| i.queue == q)
                .and_then(QueueIrq::cpu)
            {
                Some(cpu) => cpu,
                None => {
                    assumed.push(q.to_string());
                    q % online
                }
            }
        })
        .collect();
    if !assumed.is_empty() {
        notes.push(format!(
            "queue_cpus assumed queue i -> CPU i % {online}: no IRQ found for queue {}",
            assumed.join(", ")
        ));
    }
    let rps_cpus = if g
        .rps_cpus
        .iter()
        .take(queues as usize)
        .any(|c| !c.is_empty())
    {
        let mut rps: Vec<Vec<u32>> = g.rps_cpus.iter().take(queues as usize).cloned().collect();
        rps.resize(queues as usize, Vec::new());
        rps
    } else {
        Vec::new()
    };

    let config = RssConfig {
        version: CONFIG_VERSION,
        hash_function,
        key,
        input_transform,
        fields,
        queues,
        indirection_table,
        queue_cpus,
        rps_cpus,
    };
    config.validate()?;
    Ok(Built::Config(config))
}

/// Notes about IRQs whose CPU is ambiguous.
fn irq_notes(irqs: &[QueueIrq], notes: &mut Vec<String>) {
    for i in irqs {
        if i.effective_cpus.is_empty() && i.cpus.len() > 1 {
            notes.push(format!(
                "queue {} IRQ {} may run on CPUs {:?} and the kernel shows no effective affinity: assuming the first ({})",
                i.queue, i.irq, i.cpus, i.cpus[0]
            ));
        } else if i.effective_cpus.len() > 1 {
            notes.push(format!(
                "queue {} IRQ {} is delivered to several CPUs {:?}: assuming the first",
                i.queue, i.irq, i.effective_cpus
            ));
        }
    }
}

/// The ethtool genl family, if this kernel has it.
struct EthtoolNl {
    socket: NlSocket,
    family: u16,
}

impl EthtoolNl {
    fn open() -> Result<Self, NlFailure> {
        let mut socket = NlSocket::open(NETLINK_GENERIC)?;
        let family = netlink::resolve_family(&mut socket, ethtool_nl::FAMILY_NAME)?;
        Ok(EthtoolNl { socket, family })
    }

    /// One GET request; the attributes of the reply with `reply_cmd`.
    fn get(&mut self, cmd: u8, reply_cmd: u8, dev: &str) -> Result<Vec<u8>, NlFailure> {
        let request = EthtoolMessage::get(cmd, dev);
        let replies = netlink::genl_request(&mut self.socket, self.family, request, false)?;
        replies
            .into_iter()
            .find(|m| m.cmd == reply_cmd)
            .map(|m| m.attrs)
            .ok_or_else(|| NlFailure::Decode(format!("no reply with command {reply_cmd}")))
    }
}

fn decode_err(what: &str, e: AttrError) -> LiveError {
    LiveError::Decode {
        what: what.to_string(),
        reason: e.to_string(),
    }
}

/// [`inspect`] with options: /proc and /sys elsewhere (the kernel calls still
/// go to the running kernel), or without netlink.
pub fn inspect_with(dev: &str, options: &InspectOptions) -> Result<DeviceReport, LiveError> {
    let roots = &options.roots;
    check_name(dev)?;
    let ifindex =
        sys::if_nametoindex(dev).map_err(|e| LiveError::from_errno("if_nametoindex", dev, e))?;
    let ioctl = sys::EthtoolIoctl::open()
        .map_err(|e| LiveError::from_errno("socket for SIOCETHTOOL", dev, e))?;
    let mut notes = Vec::new();
    let mut lacks = Vec::new();

    // sysfs shows the devices of the network namespace it was mounted in,
    // which need not be this thread's (after setns): trust it only when it
    // names the same ifindex.
    let sysfs_ok = match roots.sysfs_ifindex(dev) {
        Some(i) if i == ifindex => true,
        Some(other) => {
            notes.push(format!(
                "{} shows another network namespace's {dev} (ifindex {other}, not {ifindex}): RPS masks and the device's bus were not read",
                roots.sys.display()
            ));
            false
        }
        None => {
            notes.push(format!(
                "{dev} is not in {}/class/net (sysfs mounted from another network namespace?): RPS masks were not read",
                roots.sys.display()
            ));
            false
        }
    };

    let mut g = Gathered {
        driver: ioctl
            .driver(dev)
            .ok()
            .filter(|d| !d.is_empty())
            .or_else(|| if sysfs_ok { roots.driver(dev) } else { None }),
        ..Gathered::default()
    };

    let nl = if options.netlink {
        EthtoolNl::open().map_err(Some)
    } else {
        Err(None)
    };
    let mut nl = match nl {
        Ok(nl) => Some(nl),
        Err(None) => {
            notes.push("ethtool netlink not used: channel counts not read".into());
            None
        }
        Err(Some(e)) => {
            notes.push(format!(
                "ethtool netlink is not available ({}); channel counts not read",
                e.into_live("resolving the ethtool genl family", dev)
            ));
            None
        }
    };

    // Channels.
    if let Some(nl) = nl.as_mut() {
        const WHAT: &str = "ETHTOOL_MSG_CHANNELS_GET";
        match nl.get(
            ethtool_nl::MSG_CHANNELS_GET,
            ethtool_nl::MSG_CHANNELS_GET_REPLY,
            dev,
        ) {
            Ok(attrs) => {
                g.channels = Some(Channels::parse(&attrs).map_err(|e| decode_err(WHAT, e))?)
            }
            Err(e) => {
                let e = e.into_live(WHAT, dev);
                if !e.is_unsupported() {
                    return Err(e);
                }
                lacks.push(format!(
                    "no channel counts: {} implements no channel API",
                    g.driver_phrase()
                ));
            }
        }
    }

    // RSS: netlink first, the ioctl when netlink cannot answer.
    let mut source = None;
    let mut fallback_reason = None;
    if let Some(nl) = nl.as_mut() {
        const WHAT: &str = "ETHTOOL_MSG_RSS_GET";
        match nl.get(ethtool_nl::MSG_RSS_GET, ethtool_nl::MSG_RSS_GET_REPLY, dev) {
            Ok(attrs) => {
                g.rss = Some(
                    RssReply::parse(&attrs)
                        .map_err(|e| decode_err(WHAT, e))?
                        .into(),
                );
                source = Some("ethtool-netlink".to_string());
            }
            Err(e) => {
                let e = e.into_live(WHAT, dev);
                if !e.is_unsupported() {
                    return Err(e);
                }
                fallback_reason = Some(e.to_string());
            }
        }
    }
    if g.rss.is_none() {
        match ioctl.rxfh(dev) {
            Ok(rxfh) => {
                g.rss = Some(rxfh.into());
                source = Some("ioctl".to_string());
                if let Some(reason) = fallback_reason {
                    notes.push(format!("RSS read with the ETHTOOL_GRSSH ioctl: {reason}"));
                }
            }
            Err(e) => {
                let e = LiveError::from_errno("ETHTOOL_GRSSH", dev, e);
                if !e.is_unsupported() {
                    return Err(e);
                }
            }
        }
    }

    // Hashed fields, only meaningful with RSS.
    if g.rss.is_some() {
        for flow in FlowType::ALL {
            let r = ioctl
                .rx_flow_hash(dev, flow_type_code(flow))
                .map_err(|e| format!("ETHTOOL_GRXFH: {e}"));
            g.fields.push((flow, r));
        }
    }

    // Queue IRQs and their CPUs.
    let device_link = if sysfs_ok {
        roots.device_link(dev)
    } else {
        None
    };
    let namer = irq::QueueNamer::new(dev, device_link.as_deref());
    for found in irq::find_queue_irqs(&roots.interrupts()?, &namer) {
        let (cpus, effective_cpus) = roots.irq_affinity(found.irq)?;
        g.queue_irqs.push(QueueIrq {
            queue: found.queue,
            irq: found.irq,
            name: found.name,
            cpus,
            effective_cpus,
        });
    }
    irq_notes(&g.queue_irqs, &mut notes);
    if sysfs_ok {
        g.rps_cpus = roots.rps_cpus(dev)?;
    }
    g.online_cpus = match roots.online_cpus()? {
        Some(list) if !list.is_empty() => list.len() as u32,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
    };

    let netdev_rss_key = match roots.netdev_rss_key()? {
        Some(bytes) if bytes.iter().all(|&b| b == 0) => {
            notes.push("netdev_rss_key is all zeros: no driver has initialised it yet".into());
            None
        }
        Some(bytes) => RssKey::new(bytes).ok(),
        None => None,
    };

    let rss = match build_config(&g, &mut notes)? {
        Built::Config(c) => Some(c),
        Built::Lacks(l) => {
            lacks.push(l);
            None
        }
    };

    Ok(DeviceReport {
        dev: dev.to_string(),
        ifindex,
        driver: g.driver,
        channels: g.channels,
        rss,
        source,
        lacks,
        queue_irqs: g.queue_irqs,
        rps_cpus: g.rps_cpus,
        netdev_rss_key,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(queues: u32) -> RssParts {
        RssParts {
            hfunc: ethtool_nl::ETH_RSS_HASH_TOP,
            indir: (0..8).map(|i| i % queues).collect(),
            key: crate::key::MICROSOFT_KEY.to_vec(),
            input_xfrm: 0,
        }
    }

    fn irq(queue: u32, cpu: u32) -> QueueIrq {
        QueueIrq {
            queue,
            irq: 100 + queue,
            name: format!("eth0-TxRx-{queue}"),
            cpus: vec![cpu],
            effective_cpus: vec![cpu],
        }
    }

    fn four_tuple_fields() -> Vec<(FlowType, Result<u64, String>)> {
        let all = RXH_IP_SRC | RXH_IP_DST | RXH_L4_B_0_1 | RXH_L4_B_2_3;
        FlowType::ALL.iter().map(|f| (*f, Ok(all))).collect()
    }

    #[test]
    fn full_config_from_parts() {
        let g = Gathered {
            driver: Some("ixgbe".into()),
            channels: Some(Channels {
                combined: Some(ChannelCount { current: 2, max: 8 }),
                ..Channels::default()
            }),
            rss: Some(parts(2)),
            fields: four_tuple_fields(),
            queue_irqs: vec![irq(0, 3), irq(1, 5)],
            rps_cpus: vec![vec![], vec![]],
            online_cpus: 8,
        };
        let mut notes = Vec::new();
        let Built::Config(c) = build_config(&g, &mut notes).unwrap() else {
            panic!("no config")
        };
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(c.queues, 2);
        assert_eq!(c.queue_cpus, vec![3, 5]);
        assert_eq!(c.hash_function, HashFunction::Toeplitz);
        assert_eq!(c.fields, HashFieldsByFlow::all_four_tuple());
        assert!(c.rps_cpus.is_empty());
        assert_eq!(c.indirection_table.entries(), &[0, 1, 0, 1, 0, 1, 0, 1]);
    }

    #[test]
    fn fallbacks_are_noted() {
        let g = Gathered {
            driver: Some("foo".into()),
            channels: None,
            rss: Some(RssParts {
                hfunc: 0,
                input_xfrm: ethtool_nl::RXH_XFRM_SYM_XOR,
                ..parts(4)
            }),
            fields: vec![(FlowType::Tcp4, Err("ETHTOOL_GRXFH: nope".into()))],
            queue_irqs: vec![irq(0, 1)],
            rps_cpus: vec![vec![], vec![2, 3]],
            online_cpus: 2,
        };
        let mut notes = Vec::new();
        let Built::Config(c) = build_config(&g, &mut notes).unwrap() else {
            panic!("no config")
        };
        assert_eq!(c.queues, 4, "table's max queue + 1");
        assert_eq!(c.queue_cpus, vec![1, 1, 0, 1]);
        assert_eq!(c.input_transform, InputTransform::SymXor);
        assert_eq!(c.fields, HashFieldsByFlow::linux_default());
        assert_eq!(c.rps_cpus, vec![vec![], vec![2, 3], vec![], vec![]]);
        let all = notes.join("\n");
        assert!(all.contains("assuming Toeplitz"), "{all}");
        assert!(all.contains("highest queue + 1 = 4"), "{all}");
        assert!(
            all.contains("queue_cpus assumed queue i -> CPU i % 2: no IRQ found for queue 1, 2, 3"),
            "{all}"
        );
        assert!(
            all.contains("hashed fields unknown for tcp4 (ETHTOOL_GRXFH: nope)"),
            "{all}"
        );
    }

    #[test]
    fn non_toeplitz_is_kept() {
        let g = Gathered {
            rss: Some(RssParts {
                hfunc: ethtool_nl::ETH_RSS_HASH_CRC32,
                ..parts(2)
            }),
            fields: four_tuple_fields(),
            online_cpus: 2,
            ..Gathered::default()
        };
        let Built::Config(c) = build_config(&g, &mut Vec::new()).unwrap() else {
            panic!("no config")
        };
        assert_eq!(c.hash_function, HashFunction::Crc32);
    }

    #[test]
    fn lacks_are_stated() {
        let mut g = Gathered {
            driver: Some("veth".into()),
            ..Gathered::default()
        };
        assert_eq!(
            build_config(&g, &mut Vec::new()).unwrap(),
            Built::Lacks(
                "no RSS: the driver (veth) implements no RSS hash or indirection table".into()
            )
        );
        g.driver = Some("virtio_net".into());
        g.rss = Some(RssParts {
            hfunc: 1,
            ..RssParts::default()
        });
        assert_eq!(
            build_config(&g, &mut Vec::new()).unwrap(),
            Built::Lacks(
                "no RSS: the driver (virtio_net) reports no indirection table and no hash key"
                    .into()
            )
        );
        g.rss = Some(RssParts {
            hfunc: 0x18,
            ..parts(2)
        });
        match build_config(&g, &mut Vec::new()).unwrap() {
            Built::Lacks(l) => assert!(l.contains("0x18"), "{l}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rxh_bits_map_to_fields() {
        let mut notes = Vec::new();
        let f = fields_from_rxh(FlowType::Udp4, RXH_IP_SRC | RXH_IP_DST, &mut notes);
        assert_eq!(f, HashFields::TWO_TUPLE);
        assert!(notes.is_empty());
        let f = fields_from_rxh(
            FlowType::Tcp6,
            RXH_IP_DST | RXH_L4_B_2_3 | RXH_VLAN,
            &mut notes,
        );
        assert!(!f.src_ip && f.dst_ip && !f.src_port && f.dst_port);
        assert!(notes[0].contains("VLAN"), "{notes:?}");
    }

    #[test]
    fn device_names_are_checked() {
        for bad in ["", "a/b", "eth0:1", "abcdefghijklmnop", "..", "a b"] {
            let e = check_name(bad).unwrap_err();
            assert!(e.is_bad_input(), "{bad}: {e}");
        }
        assert!(check_name("eth0").is_ok());
    }

    #[test]
    fn inspect_reads_injected_files() {
        let t = files::tests::FakeTree::new("inspect");
        t.write(
            "proc/interrupts",
            "     CPU0 CPU1\n 77: 1 2 PCI-MSI 1-edge lo-rx-0\n 78: 1 2 PCI-MSI 1-edge lo-tx-0\n",
        );
        t.write("proc/irq/77/smp_affinity_list", "0-1\n");
        t.write("proc/sys/net/core/netdev_rss_key", "6d:5a:56:da\n");
        t.write("sys/class/net/lo/ifindex", "1\n");
        t.write("sys/class/net/lo/queues/rx-0/rps_cpus", "00000002\n");
        t.write("sys/devices/system/cpu/online", "0-1\n");
        let options = InspectOptions {
            roots: t.roots(),
            netlink: true,
        };
        let report = inspect_with("lo", &options).unwrap();
        assert_eq!(report.queue_irqs.len(), 1, "{:?}", report.queue_irqs);
        assert_eq!(report.queue_irqs[0].irq, 77);
        assert_eq!(report.queue_irqs[0].cpus, vec![0, 1]);
        assert_eq!(report.rps_cpus, vec![vec![1]]);
        assert_eq!(
            report.netdev_rss_key.unwrap().as_bytes(),
            &[0x6d, 0x5a, 0x56, 0xda]
        );
        assert!(
            report
                .notes
                .iter()
                .any(|n| n.contains("assuming the first (0)")),
            "{:?}",
            report.notes
        );
        assert!(report.rss.is_none());

        // A sysfs whose lo has another ifindex is not trusted.
        t.write("sys/class/net/lo/ifindex", "9\n");
        let report = inspect_with("lo", &options).unwrap();
        assert!(report.rps_cpus.is_empty());
        assert!(
            report
                .notes
                .iter()
                .any(|n| n.contains("another network namespace")),
            "{:?}",
            report.notes
        );
    }

    #[test]
    fn ambiguous_irq_cpus_are_noted() {
        let mut notes = Vec::new();
        let mut i = irq(0, 0);
        i.cpus = vec![0, 1];
        i.effective_cpus = vec![];
        irq_notes(&[i], &mut notes);
        assert!(notes[0].contains("assuming the first (0)"), "{notes:?}");
    }
}

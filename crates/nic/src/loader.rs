//! The control plane of the software RSS: turns an [`RssConfig`] into the
//! contents of the XDP program's maps (see `bpf/softrss.h`), loads the
//! program from its skeleton, attaches it with netlink and pins its maps.
//!
//! Every function here runs in the caller's network namespace; `lib.rs` puts
//! it in the right one.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle, Xdp, XdpFlags};
use rss::{FlowTuple, HashFields, HashFunction, InputTransform, L4Proto, RssConfig};

use crate::error::NicError;
use crate::state;

host::bpf_skeleton!(
    "softrss.skel.rs",
    pod: [
        softrss_config,
        softrss_toeplitz,
        softrss_indir_entry,
        softrss_cpumap_counters,
        softrss_flow_key,
        softrss_flow_value,
        softrss_counters,
    ]
);
pub(crate) use skel::types;

/// Loads the opened skeleton of one of Steer's BPF programs (this crate's,
/// the load balancer's, the cgroup binder's): a refusal is missing
/// privilege, any other failure the kernel refusing `program` (the
/// verifier, or a map type or helper it lacks), said with what the program
/// `needs`.
pub fn load_program<'obj, S: OpenSkel<'obj>>(
    open: S,
    program: &str,
    needs: &str,
) -> Result<S::Output, NicError> {
    open.load().map_err(|e| match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => NicError::Privilege {
            what: format!("load {program}"),
        },
        _ => NicError::KernelFeature {
            what: format!("loading {program} ({needs}) failed: {e}"),
        },
    })
}

/// The constants of `softrss.h`, generated from it by build.rs (all of
/// them; Rust uses those it needs).
#[allow(dead_code)]
mod abi {
    include!(concat!(env!("OUT_DIR"), "/softrss_h.rs"));
}

/// Limits of the datapath (`softrss.h`).
pub const MAX_INPUT: usize = abi::SOFTRSS_MAX_INPUT as usize;
pub const MAX_QUEUES: u32 = abi::SOFTRSS_MAX_QUEUES;
pub const MAX_TABLE: usize = abi::SOFTRSS_MAX_TABLE as usize;
pub const MAX_FLOWS: u32 = abi::SOFTRSS_MAX_FLOWS;
/// cpumap's per-CPU queue limit (kernel/bpf/cpumap.c).
pub const MAX_CPUMAP_QSIZE: u32 = 16384;

use abi::{
    SOFTRSS_F_DST_IP as FLAG_DST_IP, SOFTRSS_F_DST_PORT as FLAG_DST_PORT,
    SOFTRSS_F_SRC_IP as FLAG_SRC_IP, SOFTRSS_F_SRC_PORT as FLAG_SRC_PORT,
};

/// The map contents for one config, computed before anything is touched.
pub(crate) struct Plan {
    pub config: types::softrss_config,
    pub toeplitz: Box<types::softrss_toeplitz>,
    pub indir: Vec<types::softrss_indir_entry>,
    /// The CPUs that serve queues (cpumap entries).
    pub cpus: Vec<u32>,
}

fn unsupported(reason: impl Into<String>) -> NicError {
    NicError::UnsupportedConfig {
        reason: reason.into(),
    }
}

fn field_bits(fields: HashFields) -> u32 {
    let mut bits = 0;
    for (on, bit) in [
        (fields.src_ip, FLAG_SRC_IP),
        (fields.dst_ip, FLAG_DST_IP),
        (fields.src_port, FLAG_SRC_PORT),
        (fields.dst_port, FLAG_DST_PORT),
    ] {
        if on {
            bits |= bit;
        }
    }
    bits
}

/// Checks that the datapath can do exactly what `config` says, and computes
/// the map contents. Pure: no kernel calls.
pub(crate) fn plan(
    config: &RssConfig,
    track_flows: bool,
    qsize: u32,
    possible_cpus: usize,
) -> Result<Plan, NicError> {
    config.validate()?;
    if config.hash_function != HashFunction::Toeplitz {
        return Err(unsupported(format!(
            "hash function '{}': the software RSS implements Toeplitz only",
            config.hash_function.name()
        )));
    }
    if config.key.len() < MAX_INPUT + 4 {
        return Err(unsupported(format!(
            "a {}-byte key cannot hash an IPv6 4-tuple; the software RSS needs at least {} bytes",
            config.key.len(),
            MAX_INPUT + 4
        )));
    }
    if config.queues > MAX_QUEUES {
        return Err(unsupported(format!(
            "{} queues; the software RSS supports at most {MAX_QUEUES}",
            config.queues
        )));
    }
    if config.indirection_table.len() > MAX_TABLE {
        return Err(unsupported(format!(
            "indirection table of {} entries; at most {MAX_TABLE}",
            config.indirection_table.len()
        )));
    }
    if config.rps_cpus.iter().any(|cpus| !cpus.is_empty()) {
        return Err(unsupported(
            "rps_cpus: the software RSS delivers each queue to one CPU (queue_cpus); clear rps_cpus",
        ));
    }
    if let Some(&cpu) = config
        .queue_cpus
        .iter()
        .find(|&&cpu| cpu as usize >= possible_cpus)
    {
        return Err(unsupported(format!(
            "queue_cpus names CPU {cpu}, but this machine has CPUs 0..{}",
            possible_cpus.saturating_sub(1)
        )));
    }
    if qsize == 0 || qsize > MAX_CPUMAP_QSIZE {
        return Err(unsupported(format!(
            "cpumap queue size {qsize}: must be 1..={MAX_CPUMAP_QSIZE}"
        )));
    }

    let table = rss::ToeplitzTable::new(&config.key);
    let mut toeplitz = Box::<types::softrss_toeplitz>::default();
    let mut input = [0u8; MAX_INPUT];
    for p in 0..MAX_INPUT {
        for v in 0..=255u8 {
            // Only byte p is non-zero, and zero bytes contribute nothing:
            // this is exactly the table entry for (p, v).
            input[p] = v;
            toeplitz.t[p][usize::from(v)] = table.hash(&input[..=p])?;
        }
        input[p] = 0;
    }

    let indir = config
        .indirection_table
        .entries()
        .iter()
        .map(|&queue| types::softrss_indir_entry {
            queue,
            cpu: config.queue_cpus[queue as usize],
        })
        .collect();

    let transform = match config.input_transform {
        InputTransform::None => abi::SOFTRSS_XFRM_NONE,
        InputTransform::SymXor => abi::SOFTRSS_XFRM_SYM_XOR,
        InputTransform::SymOrXor => abi::SOFTRSS_XFRM_SYM_OR_XOR,
    };
    let f = &config.fields;
    let datapath = types::softrss_config {
        table_size: config.indirection_table.len() as u32,
        transform,
        fields: [
            field_bits(f.tcp4),
            field_bits(f.udp4),
            field_bits(f.tcp6),
            field_bits(f.udp6),
        ],
        track_flows: u32::from(track_flows),
        cpumap_qsize: qsize,
        queues: config.queues,
        same_cpu_pass: 0,
        // Known once the map exists (load_and_attach; update keeps it).
        cpumap_id: 0,
        pad: 0,
    };
    Ok(Plan {
        config: datapath,
        toeplitz,
        indir,
        cpus: config.cpus(),
    })
}

/// The maps of one attachment, from the skeleton or from their pins.
pub(crate) struct Maps {
    pub config: MapHandle,
    pub toeplitz: MapHandle,
    pub indir: MapHandle,
    pub cpu_map: MapHandle,
    pub queue_stats: MapHandle,
    pub non_ip: MapHandle,
    pub flows: MapHandle,
    pub cpumap_stats: MapHandle,
}

const ZERO: [u8; 4] = [0; 4];

impl Maps {
    pub fn open_pinned(dir: &Path) -> Result<Maps, NicError> {
        let open = |name: &str| {
            MapHandle::from_pinned_path(dir.join(name))
                .map_err(|e| NicError::bpf(format!("open pinned map {name}"), e))
        };
        Ok(Maps {
            config: open("config")?,
            toeplitz: open("toeplitz")?,
            indir: open("indir")?,
            cpu_map: open("cpu_map")?,
            queue_stats: open("queue_stats")?,
            non_ip: open("non_ip")?,
            flows: open("flows")?,
            cpumap_stats: open("cpumap_stats")?,
        })
    }

    /// The datapath config (map `config`).
    pub fn datapath_config(&self) -> Result<types::softrss_config, NicError> {
        let bytes = self
            .config
            .lookup(&ZERO, MapFlags::ANY)
            .map_err(|e| NicError::bpf("read map config", e))?
            .unwrap_or_default();
        bytemuck::try_pod_read_unaligned(&bytes)
            .ok()
            .ok_or_else(|| NicError::State {
                path: "map config".into(),
                reason: format!("value of {} bytes", bytes.len()),
            })
    }

    /// Writes a plan. The `config` entry goes last, so a running program
    /// switches to the new fields and table size only once the key, table and
    /// CPUs behind them are in place.
    pub fn write(&self, plan: &Plan) -> Result<(), NicError> {
        let err = |map: &'static str| move |e| NicError::bpf(format!("write map {map}"), e);
        self.toeplitz
            .update(&ZERO, bytemuck::bytes_of(&*plan.toeplitz), MapFlags::ANY)
            .map_err(err("toeplitz"))?;
        for &cpu in &plan.cpus {
            // struct bpf_cpumap_val (uapi/linux/bpf.h): qsize, then the fd of
            // a program to run on the remote CPU (0: none).
            let mut value = [0u8; 8];
            value[..4].copy_from_slice(&plan.config.cpumap_qsize.to_ne_bytes());
            self.cpu_map
                .update(&cpu.to_ne_bytes(), &value, MapFlags::ANY)
                .map_err(|e| match e.kind() {
                    libbpf_rs::ErrorKind::InvalidInput => NicError::UnsupportedConfig {
                        reason: format!(
                            "the kernel refused a cpumap entry for CPU {cpu} (offline?)"
                        ),
                    },
                    _ => NicError::bpf(format!("write map cpu_map (CPU {cpu})"), e),
                })?;
        }
        for (index, entry) in plan.indir.iter().enumerate() {
            self.indir
                .update(
                    &(index as u32).to_ne_bytes(),
                    bytemuck::bytes_of(entry),
                    MapFlags::ANY,
                )
                .map_err(err("indir"))?;
        }
        self.config
            .update(&ZERO, bytemuck::bytes_of(&plan.config), MapFlags::ANY)
            .map_err(err("config"))?;
        Ok(())
    }

    /// Per-queue counters summed over CPUs, for queues 0..queues.
    pub fn queue_counters(&self, queues: u32) -> Result<Vec<types::softrss_counters>, NicError> {
        (0..queues.min(MAX_QUEUES))
            .map(|q| sum_percpu(&self.queue_stats, q, "queue_stats"))
            .collect()
    }

    pub fn non_ip_counters(&self) -> Result<types::softrss_counters, NicError> {
        sum_percpu(&self.non_ip, 0, "non_ip")
    }

    /// The cpumap counters of destination `cpu`, summed over the CPUs that
    /// wrote them.
    pub fn cpumap_counters(&self, cpu: u32) -> Result<types::softrss_cpumap_counters, NicError> {
        let values = self
            .cpumap_stats
            .lookup_percpu(&cpu.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| NicError::bpf("read map cpumap_stats", e))?;
        let mut sum = types::softrss_cpumap_counters::default();
        for c in
            host::bpf::percpu_values::<types::softrss_cpumap_counters>("cpumap_stats", cpu, values)?
        {
            sum.enqueued += c.enqueued;
            sum.enqueue_drops += c.enqueue_drops;
            sum.kthread_processed += c.kthread_processed;
            sum.kthread_drops += c.kthread_drops;
        }
        Ok(sum)
    }

    pub fn reset_counters(&self) -> Result<(), NicError> {
        let cpus = possible_cpus()?;
        let zero = vec![vec![0u8; std::mem::size_of::<types::softrss_counters>()]; cpus];
        for q in 0..MAX_QUEUES {
            self.queue_stats
                .update_percpu(&q.to_ne_bytes(), &zero, MapFlags::ANY)
                .map_err(|e| NicError::bpf("reset map queue_stats", e))?;
        }
        self.non_ip
            .update_percpu(&ZERO, &zero, MapFlags::ANY)
            .map_err(|e| NicError::bpf("reset map non_ip", e))?;
        let zero = vec![vec![0u8; std::mem::size_of::<types::softrss_cpumap_counters>()]; cpus];
        for cpu in 0..cpus as u32 {
            self.cpumap_stats
                .update_percpu(&cpu.to_ne_bytes(), &zero, MapFlags::ANY)
                .map_err(|e| NicError::bpf("reset map cpumap_stats", e))?;
        }
        Ok(())
    }

    /// Every entry of the flow table.
    pub fn flows(&self) -> Result<Vec<(FlowTuple, types::softrss_flow_value)>, NicError> {
        let mut out = Vec::new();
        for key in self.flows.keys() {
            let Some(value) = self
                .flows
                .lookup(&key, MapFlags::ANY)
                .map_err(|e| NicError::bpf("read map flows", e))?
            else {
                continue; // evicted between keys() and lookup()
            };
            let (Some(k), Some(v)) = (
                bytemuck::try_pod_read_unaligned::<types::softrss_flow_key>(&key).ok(),
                bytemuck::try_pod_read_unaligned::<types::softrss_flow_value>(&value).ok(),
            ) else {
                continue;
            };
            if let Some(tuple) = flow_tuple(&k) {
                out.push((tuple, v));
            }
        }
        Ok(out)
    }

    pub fn clear_flows(&self) -> Result<(), NicError> {
        let keys: Vec<Vec<u8>> = self.flows.keys().collect();
        for key in keys {
            match self.flows.delete(&key) {
                Err(e) if e.kind() != libbpf_rs::ErrorKind::NotFound => {
                    return Err(NicError::bpf("clear map flows", e))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn sum_percpu(map: &MapHandle, key: u32, name: &str) -> Result<types::softrss_counters, NicError> {
    let values = map
        .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
        .map_err(|e| NicError::bpf(format!("read map {name}"), e))?;
    let mut sum = types::softrss_counters::default();
    for c in host::bpf::percpu_values::<types::softrss_counters>(name, key, values)? {
        sum.packets += c.packets;
        sum.bytes += c.bytes;
    }
    Ok(sum)
}

/// The flow a `flows` key describes.
fn flow_tuple(k: &types::softrss_flow_key) -> Option<FlowTuple> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let (src, dst): (IpAddr, IpAddr) = match u32::from(k.family) {
        abi::SOFTRSS_FAMILY_IPV4 => (
            Ipv4Addr::new(k.src[0], k.src[1], k.src[2], k.src[3]).into(),
            Ipv4Addr::new(k.dst[0], k.dst[1], k.dst[2], k.dst[3]).into(),
        ),
        abi::SOFTRSS_FAMILY_IPV6 => (Ipv6Addr::from(k.src).into(), Ipv6Addr::from(k.dst).into()),
        _ => return None,
    };
    let proto = match k.proto {
        6 => L4Proto::Tcp,
        17 => L4Proto::Udp,
        _ => L4Proto::Other,
    };
    // Ports are stored as they were in the packet (network order).
    let port = |p: u16| u16::from_be_bytes(p.to_ne_bytes());
    Some(FlowTuple::new(
        src,
        port(k.src_port),
        dst,
        port(k.dst_port),
        proto,
    ))
}

pub(crate) fn possible_cpus() -> Result<usize, NicError> {
    libbpf_rs::num_possible_cpus().map_err(|e| NicError::bpf("count possible CPUs", e))
}

/// The id of the XDP program attached to `ifindex` (0: none).
pub(crate) fn attached_prog_id(ifindex: u32) -> Result<u32, NicError> {
    let mut id = 0u32;
    // SAFETY: bpf_xdp_query_id writes one u32 through the valid pointer.
    let ret = unsafe { libbpf_rs::libbpf_sys::bpf_xdp_query_id(ifindex as i32, 0, &mut id) };
    if ret < 0 {
        return Err(NicError::io(
            format!("query XDP program of ifindex {ifindex}"),
            std::io::Error::from_raw_os_error(-ret),
        ));
    }
    Ok(id)
}

/// The pinned program of an attachment, if the pins exist.
pub(crate) fn pinned_prog(dir: &Path) -> Option<(OwnedFd, u32)> {
    let fd = libbpf_rs::Program::fd_from_pinned_path(dir.join(state::PIN_PROG)).ok()?;
    let id = libbpf_rs::Program::id_from_fd(fd.as_fd()).ok()?;
    Some((fd, id))
}

/// Loads the program, fills its maps (setting `plan`'s cpumap id), attaches it to `ifindex` (replacing
/// `old`, Steer's previous program, atomically) and pins everything in `dir`.
pub(crate) fn load_and_attach(
    plan: &mut Plan,
    ifindex: u32,
    old: Option<&OwnedFd>,
    dir: &Path,
) -> Result<(), NicError> {
    let cpus = possible_cpus()?;
    let mut storage = std::mem::MaybeUninit::uninit();
    let mut open = skel::SoftrssSkelBuilder::default()
        .open(&mut storage)
        .map_err(|e| NicError::bpf("open softrss skeleton", e))?;
    open.maps
        .cpu_map
        .set_max_entries(cpus as u32)
        .map_err(|e| NicError::bpf("size map cpu_map", e))?;
    let flows = if plan.config.track_flows != 0 {
        MAX_FLOWS
    } else {
        1
    };
    open.maps
        .flows
        .set_max_entries(flows)
        .map_err(|e| NicError::bpf("size map flows", e))?;
    let mut skel = load_program(open, "the XDP program", "BPF verifier or map type")?;

    let handle = |map: &libbpf_rs::MapMut<'_>, name: &str| {
        MapHandle::try_from(map).map_err(|e| NicError::bpf(format!("dup map {name}"), e))
    };
    let maps = Maps {
        config: handle(&skel.maps.config, "config")?,
        toeplitz: handle(&skel.maps.toeplitz, "toeplitz")?,
        indir: handle(&skel.maps.indir, "indir")?,
        cpu_map: handle(&skel.maps.cpu_map, "cpu_map")?,
        queue_stats: handle(&skel.maps.queue_stats, "queue_stats")?,
        non_ip: handle(&skel.maps.non_ip, "non_ip")?,
        flows: handle(&skel.maps.flows, "flows")?,
        cpumap_stats: handle(&skel.maps.cpumap_stats, "cpumap_stats")?,
    };
    plan.config.cpumap_id = skel
        .maps
        .cpu_map
        .info()
        .map_err(|e| NicError::bpf("read map cpu_map info", e))?
        .info
        .id;
    maps.write(plan)?;
    // The cpumap's own drop counters (softrss.bpf.c, cpumap_enqueue and
    // cpumap_kthread); their links are pinned with the rest below.
    let attach_tp = |prog: &libbpf_rs::ProgramMut<'_>, tp: &str| {
        prog.attach_raw_tracepoint(tp)
            .map_err(|e| NicError::KernelFeature {
                what: format!("raw tracepoint {tp} (cpumap counters): {e}"),
            })
    };
    let mut links = [
        attach_tp(&skel.progs.cpumap_enqueue, "xdp_cpumap_enqueue")?,
        attach_tp(&skel.progs.cpumap_kthread, "xdp_cpumap_kthread")?,
    ];

    let attached = {
        let xdp = Xdp::new(skel.progs.softrss.as_fd());
        match old {
            Some(old) => xdp.replace(ifindex as i32, old.as_fd()),
            None => xdp.attach(ifindex as i32, XdpFlags::UPDATE_IF_NOEXIST),
        }
    };
    attached.map_err(|e| match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => NicError::Privilege {
            what: "attach XDP".into(),
        },
        libbpf_rs::ErrorKind::Unsupported => NicError::KernelFeature {
            what: format!("XDP on ifindex {ifindex}: {e}"),
        },
        _ => NicError::bpf(format!("attach XDP to ifindex {ifindex}"), e),
    })?;

    // From here on the program runs; a failure must undo the attachment.
    let pinned = (|| {
        std::fs::create_dir_all(dir)
            .map_err(|e| NicError::io(format!("create {}", dir.display()), e))?;
        for name in state::MAP_NAMES
            .iter()
            .chain(&state::PIN_LINKS)
            .chain([&state::PIN_PROG])
        {
            let path = dir.join(name);
            if path.exists() {
                std::fs::remove_file(&path)
                    .map_err(|e| NicError::io(format!("remove {}", path.display()), e))?;
            }
        }
        let pin = |map: &mut libbpf_rs::MapMut<'_>, name: &str| {
            map.pin(dir.join(name))
                .map_err(|e| NicError::bpf(format!("pin map {name}"), e))
        };
        pin(&mut skel.maps.config, "config")?;
        pin(&mut skel.maps.toeplitz, "toeplitz")?;
        pin(&mut skel.maps.indir, "indir")?;
        pin(&mut skel.maps.cpu_map, "cpu_map")?;
        pin(&mut skel.maps.queue_stats, "queue_stats")?;
        pin(&mut skel.maps.non_ip, "non_ip")?;
        pin(&mut skel.maps.flows, "flows")?;
        pin(&mut skel.maps.cpumap_stats, "cpumap_stats")?;
        for (link, name) in links.iter_mut().zip(state::PIN_LINKS) {
            link.pin(dir.join(name))
                .map_err(|e| NicError::bpf(format!("pin link {name}"), e))?;
        }
        skel.progs
            .softrss
            .pin(dir.join(state::PIN_PROG))
            .map_err(|e| NicError::bpf("pin program", e))
    })();
    if let Err(e) = pinned {
        let _ = Xdp::new(skel.progs.softrss.as_fd()).detach(ifindex as i32, XdpFlags::NONE);
        return Err(e);
    }
    Ok(())
}

/// Detaches the XDP program from `ifindex` if it is `prog` (Steer's).
pub(crate) fn detach(ifindex: u32, prog: &OwnedFd) -> Result<(), NicError> {
    let opts = libbpf_rs::libbpf_sys::bpf_xdp_attach_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_xdp_attach_opts>() as _,
        old_prog_fd: prog.as_raw_fd(),
        ..Default::default()
    };
    // SAFETY: opts is a valid, sized bpf_xdp_attach_opts; fd -1 detaches,
    // XDP_FLAGS_REPLACE makes it conditional on `prog` being the one attached.
    let ret = unsafe {
        libbpf_rs::libbpf_sys::bpf_xdp_attach(
            ifindex as i32,
            -1,
            libbpf_rs::libbpf_sys::XDP_FLAGS_REPLACE,
            &opts,
        )
    };
    if ret < 0 {
        return Err(NicError::io(
            format!("detach XDP from ifindex {ifindex}"),
            std::io::Error::from_raw_os_error(-ret),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rss::{IndirectionTable, RssKey};

    fn config() -> RssConfig {
        RssConfig::ethtool_default(RssKey::new(vec![7; 52]).unwrap(), 4, 128).unwrap()
    }

    #[test]
    fn plan_tables_are_the_models_tables() {
        let c = config();
        let plan = plan(&c, false, 2048, 4).unwrap();
        let table = rss::ToeplitzTable::new(&c.key);
        let input: Vec<u8> = (0..36u8).map(|i| i.wrapping_mul(37)).collect();
        let datapath = input
            .iter()
            .enumerate()
            .fold(0u32, |h, (p, &b)| h ^ plan.toeplitz.t[p][usize::from(b)]);
        assert_eq!(datapath, table.hash(&input).unwrap());
        assert_eq!(plan.indir.len(), 128);
        assert_eq!(plan.indir[5].queue, 1);
        assert_eq!(plan.indir[5].cpu, 1);
        assert_eq!(plan.config.fields[0], 0b1111);
        assert_eq!(plan.config.fields[1], 0b0011);
    }

    #[test]
    fn unsupported_configs_are_refused() {
        let mut c = config();
        c.hash_function = HashFunction::Xor;
        assert!(matches!(
            plan(&c, false, 2048, 4),
            Err(NicError::UnsupportedConfig { .. })
        ));

        let mut c = config();
        c.key = RssKey::microsoft(); // 40 bytes: fine
        assert!(plan(&c, false, 2048, 4).is_ok());
        c.key = RssKey::new(vec![1; 39]).unwrap();
        assert!(matches!(
            plan(&c, false, 2048, 4),
            Err(NicError::UnsupportedConfig { .. })
        ));

        let c = RssConfig::ethtool_default(RssKey::new(vec![7; 52]).unwrap(), 300, 512).unwrap();
        assert!(matches!(
            plan(&c, false, 2048, 512),
            Err(NicError::UnsupportedConfig { .. })
        ));

        let mut c = config();
        c.queue_cpus = vec![0, 1, 2, 9];
        assert!(matches!(
            plan(&c, false, 2048, 4),
            Err(NicError::UnsupportedConfig { .. })
        ));
        assert!(matches!(
            plan(&config(), false, 0, 4),
            Err(NicError::UnsupportedConfig { .. })
        ));
    }

    #[test]
    fn queue_out_of_range_is_invalid_input() {
        let mut c = config();
        c.indirection_table = IndirectionTable::from_entries(vec![0, 1, 2, 7]).unwrap();
        let err = plan(&c, false, 2048, 4).err().unwrap();
        assert!(matches!(err, NicError::InvalidConfig(_)), "{err}");
        assert!(!err.is_environment());
    }
}

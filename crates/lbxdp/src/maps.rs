//! The control plane's side of the maps of `bpf/lbxdp.bpf.c`: load the
//! program, fill and read its maps in the load balancer's terms (backends,
//! bucket table, Maglev ring, crossrss-plus candidates), attach it, and run
//! it on crafted packets (`BPF_PROG_TEST_RUN`).
//!
//! A [`Datapath`] owns duplicated fds of the program and of every map, so it
//! outlives the skeleton and may be shared by threads (`&self` only).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use libbpf_rs::skel::SkelBuilder;
use libbpf_rs::{MapCore, MapFlags, MapHandle, Xdp, XdpFlags};
use rss::{HashFields, RssConfig};
use serde::Serialize;

use crate::error::LbXdpError;

host::bpf_skeleton!(
    "lbxdp.skel.rs",
    pod: [
        lbxdp_config,
        lbxdp_toeplitz,
        lbxdp_backend,
        lbxdp_conn_key,
        lbxdp_conn,
        lbxdp_counters,
        lbxdp_backend_counters,
        lbxdp_bucket_counters,
    ]
);
pub use skel::types;

/// The constants of `lbxdp.h`, generated from it by build.rs (all of
/// them; Rust uses those it needs).
#[allow(dead_code)]
mod abi {
    include!(concat!(env!("OUT_DIR"), "/lbxdp_h.rs"));
}

/// Limits of the data plane (`lbxdp.h`).
pub const MAX_INPUT: usize = abi::LBXDP_MAX_INPUT as usize;
pub const MAX_BUCKETS: usize = abi::LBXDP_MAX_BUCKETS as usize;
pub const MAX_BACKENDS: usize = abi::LBXDP_MAX_BACKENDS as usize;
pub const MAX_CORES: usize = abi::LBXDP_MAX_CORES as usize;
pub const RING_SIZE: usize = abi::LBXDP_RING_SIZE as usize;
pub const CANDIDATES: usize = abi::LBXDP_CANDIDATES as usize;
pub const MAX_CONNS: u32 = abi::LBXDP_MAX_CONNS;

/// How a new connection picks its backend (`LBXDP_MODE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Mode {
    /// bucket -> backend from map `buckets`.
    Table = abi::LBXDP_MODE_TABLE as isize,
    /// Per-CPU round robin over the healthy backends.
    RoundRobin = abi::LBXDP_MODE_RR as isize,
    /// Maglev lookup table (map `ring`).
    Ring = abi::LBXDP_MODE_RING as isize,
    /// crossrss-plus: ranked candidates with a per-core budget.
    Plus = abi::LBXDP_MODE_PLUS as isize,
}

/// Counter slots of map `stats` (`LBXDP_STAT_*`), in slot order.
pub const STAT_NAMES: [&str; abi::LBXDP_STATS as usize] = [
    "forwarded",
    "new_conn",
    "miss_nonsyn",
    "pass_other",
    "malformed",
    "fragment",
    "no_backend",
    "other_proto",
    "conn_full",
    "unconfigured",
];
pub const STAT_FORWARDED: usize = abi::LBXDP_STAT_FORWARDED as usize;
pub const STAT_NEW_CONN: usize = abi::LBXDP_STAT_NEW_CONN as usize;
pub const STAT_MISS_NONSYN: usize = abi::LBXDP_STAT_MISS_NONSYN as usize;
pub const STAT_PASS_OTHER: usize = abi::LBXDP_STAT_PASS_OTHER as usize;
pub const STAT_MALFORMED: usize = abi::LBXDP_STAT_MALFORMED as usize;
pub const STAT_FRAGMENT: usize = abi::LBXDP_STAT_FRAGMENT as usize;
pub const STAT_NO_BACKEND: usize = abi::LBXDP_STAT_NO_BACKEND as usize;
pub const STAT_OTHER_PROTO: usize = abi::LBXDP_STAT_OTHER_PROTO as usize;

/// XDP verdicts (uapi/linux/bpf.h `enum xdp_action`).
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_TX: u32 = 3;

/// The load balancer counters, summed over CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LbStats {
    /// Packets per `STAT_NAMES` slot.
    pub packets: Vec<u64>,
    /// Per backend slot: packets forwarded and connections created.
    pub backend_packets: Vec<u64>,
    pub backend_new_conns: Vec<u64>,
}

impl LbStats {
    pub fn get(&self, slot: usize) -> u64 {
        self.packets.get(slot).copied().unwrap_or(0)
    }
}

/// One backend as the data plane sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendEntry {
    pub mac: [u8; 6],
    pub healthy: bool,
}

fn field_bits(f: HashFields) -> u32 {
    let bit = |on: bool, flag: u32| if on { flag } else { 0 };
    bit(f.src_ip, abi::LBXDP_F_SRC_IP)
        | bit(f.dst_ip, abi::LBXDP_F_DST_IP)
        | bit(f.src_port, abi::LBXDP_F_SRC_PORT)
        | bit(f.dst_port, abi::LBXDP_F_DST_PORT)
}

const ZERO: [u8; 4] = [0; 4];

/// Declares [`Maps`], the maps the control plane uses, and the function
/// that duplicates their fds from a loaded skeleton, from one list of the
/// maps' names in lbxdp.bpf.c (errors name the map).
macro_rules! maps {
    ($($map:ident),* $(,)?) => {
        /// Duplicated fds of the program's maps, one field per map, named as
        /// in lbxdp.bpf.c.
        struct Maps {
            $($map: MapHandle,)*
        }

        impl Maps {
            fn dup(maps: &skel::LbxdpMaps<'_>) -> Result<Maps, LbXdpError> {
                Ok(Maps {
                    $($map: MapHandle::try_from(&maps.$map).map_err(|e| {
                        LbXdpError::bpf(concat!("dup map ", stringify!($map)), e)
                    })?,)*
                })
            }
        }
    };
}

maps!(
    config,
    toeplitz,
    buckets,
    ring,
    candidates,
    bucket_core,
    core_taken,
    backends,
    healthy,
    conns,
    stats,
    backend_stats,
    bucket_stats,
);

/// The loaded program and its maps.
pub struct Datapath {
    prog: OwnedFd,
    pass_prog: OwnedFd,
    maps: Maps,
    cpus: usize,
}

impl Datapath {
    /// Loads the program (not attached; every frame passes until
    /// [`Datapath::configure`] sets a VIP).
    pub fn load() -> Result<Datapath, LbXdpError> {
        let cpus = libbpf_rs::num_possible_cpus()
            .map_err(|e| LbXdpError::bpf("count possible CPUs", e))?;
        let mut storage = std::mem::MaybeUninit::uninit();
        let open = skel::LbxdpSkelBuilder::default()
            .open(&mut storage)
            .map_err(|e| LbXdpError::bpf("open lbxdp skeleton", e))?;
        let skel = nic::load_program(open, "the XDP load balancer", "BPF verifier or map type")?;
        let dup = |fd: std::os::fd::BorrowedFd<'_>, name: &str| {
            fd.try_clone_to_owned()
                .map_err(|e| LbXdpError::io(format!("dup program {name}"), e))
        };
        Ok(Datapath {
            prog: dup(skel.progs.lbxdp.as_fd(), "lbxdp")?,
            pass_prog: dup(skel.progs.xdp_pass.as_fd(), "xdp_pass")?,
            maps: Maps::dup(&skel.maps)?,
            cpus,
        })
    }

    fn put(map: &MapHandle, name: &str, key: u32, value: &[u8]) -> Result<(), LbXdpError> {
        map.update(&key.to_ne_bytes(), value, MapFlags::ANY)
            .map_err(|e| LbXdpError::bpf(format!("write map {name} [{key}]"), e))
    }

    fn read_config(&self) -> Result<types::lbxdp_config, LbXdpError> {
        let bytes = self
            .maps
            .config
            .lookup(&ZERO, MapFlags::ANY)
            .map_err(|e| LbXdpError::bpf("read map config", e))?
            .unwrap_or_default();
        bytemuck::try_pod_read_unaligned(&bytes)
            .ok()
            .ok_or_else(|| LbXdpError::config("map config has the wrong size"))
    }

    fn write_config(&self, cfg: &types::lbxdp_config) -> Result<(), LbXdpError> {
        Self::put(&self.maps.config, "config", 0, bytemuck::bytes_of(cfg))
    }

    /// Sets the VIP, the backends' key and hashed fields and the bucket
    /// count (the backends' indirection table size), and the LB's MAC.
    pub fn configure(
        &self,
        vip: std::net::Ipv4Addr,
        rss: &RssConfig,
        lb_mac: [u8; 6],
    ) -> Result<(), LbXdpError> {
        let buckets = rss.indirection_table.len();
        if buckets == 0 || buckets > MAX_BUCKETS {
            return Err(LbXdpError::config(format!(
                "{buckets} buckets: the data plane holds 1..={MAX_BUCKETS}"
            )));
        }
        if rss.hash_function != rss::HashFunction::Toeplitz
            || rss.input_transform != rss::InputTransform::None
        {
            return Err(LbXdpError::config(
                "the load balancer computes plain Toeplitz (no input transform), like the backends' software RSS defaults",
            ));
        }
        if rss.key.len() < MAX_INPUT + 4 {
            return Err(LbXdpError::config(format!(
                "a {}-byte key is too short for an IPv4 4-tuple",
                rss.key.len()
            )));
        }
        let table = rss::ToeplitzTable::new(&rss.key);
        let mut tt = Box::<types::lbxdp_toeplitz>::default();
        let mut input = [0u8; MAX_INPUT];
        for p in 0..MAX_INPUT {
            for v in 0..=255u8 {
                input[p] = v;
                tt.t[p * 256 + usize::from(v)] = table.hash(&input[..=p])?;
            }
            input[p] = 0;
        }
        Self::put(&self.maps.toeplitz, "toeplitz", 0, bytemuck::bytes_of(&*tt))?;
        let mut cfg = self.read_config()?;
        cfg.vip = u32::from_ne_bytes(vip.octets());
        cfg.buckets = buckets as u32;
        cfg.fields_tcp = field_bits(rss.fields.tcp4);
        cfg.fields_udp = field_bits(rss.fields.udp4);
        cfg.lb_mac = lb_mac;
        if cfg.candidates == 0 {
            cfg.candidates = 1;
        }
        self.write_config(&cfg)
    }

    /// Backend slots (index = server id) and which may take new
    /// connections. Slots beyond `backends.len()` are cleared.
    pub fn set_backends(&self, backends: &[BackendEntry]) -> Result<(), LbXdpError> {
        if backends.len() > MAX_BACKENDS {
            return Err(LbXdpError::config(format!(
                "{} backends: the data plane holds {MAX_BACKENDS}",
                backends.len()
            )));
        }
        for (slot, b) in backends.iter().enumerate() {
            let v = types::lbxdp_backend {
                mac: b.mac,
                healthy: u32::from(b.healthy),
                ..Default::default()
            };
            Self::put(
                &self.maps.backends,
                "backends",
                slot as u32,
                bytemuck::bytes_of(&v),
            )?;
        }
        let healthy: Vec<u32> = (0..backends.len() as u32)
            .filter(|&s| backends[s as usize].healthy)
            .collect();
        for (i, s) in healthy.iter().enumerate() {
            Self::put(&self.maps.healthy, "healthy", i as u32, &s.to_ne_bytes())?;
        }
        let mut cfg = self.read_config()?;
        cfg.healthy_count = healthy.len() as u32;
        self.write_config(&cfg)
    }

    /// Writes a bucket -> backend table (modes Table and Plus).
    pub fn write_buckets(&self, table: &[u32]) -> Result<(), LbXdpError> {
        self.check_slots(table, "bucket table")?;
        for (b, s) in table.iter().enumerate().take(MAX_BUCKETS) {
            Self::put(&self.maps.buckets, "buckets", b as u32, &s.to_ne_bytes())?;
        }
        Ok(())
    }

    /// Writes the Maglev lookup table (mode Ring); `ring.len()` must be
    /// [`RING_SIZE`].
    pub fn write_ring(&self, ring: &[u32]) -> Result<(), LbXdpError> {
        if ring.len() != RING_SIZE {
            return Err(LbXdpError::config(format!(
                "Maglev table of {} entries; the data plane uses {RING_SIZE}",
                ring.len()
            )));
        }
        self.check_slots(ring, "Maglev table")?;
        let keys: Vec<u8> = (0..RING_SIZE as u32).flat_map(u32::to_ne_bytes).collect();
        let values: Vec<u8> = ring.iter().flat_map(|s| s.to_ne_bytes()).collect();
        self.maps
            .ring
            .update_batch(
                &keys,
                &values,
                RING_SIZE as u32,
                MapFlags::ANY,
                MapFlags::ANY,
            )
            .map_err(|e| LbXdpError::bpf("write map ring", e))
    }

    /// Each backend's bucket -> core map (from its agent's report).
    pub fn write_bucket_cores(&self, slot: u32, cores: &[u32]) -> Result<(), LbXdpError> {
        if slot as usize >= MAX_BACKENDS || cores.len() > MAX_BUCKETS {
            return Err(LbXdpError::config("bucket -> core map out of range"));
        }
        if let Some(c) = cores.iter().find(|&&c| c as usize >= MAX_CORES) {
            return Err(LbXdpError::config(format!(
                "core {c}: the data plane budgets at most {MAX_CORES} cores per backend"
            )));
        }
        for (b, c) in cores.iter().enumerate() {
            let key = slot * MAX_BUCKETS as u32 + b as u32;
            Self::put(&self.maps.bucket_core, "bucket_core", key, &c.to_ne_bytes())?;
        }
        Ok(())
    }

    /// crossrss-plus's candidates (k per bucket) and the table behind them.
    pub fn write_plus(&self, plus: &lb::controller::PlusTable) -> Result<(), LbXdpError> {
        let k = plus.k.clamp(1, CANDIDATES);
        self.check_slots(&plus.candidates, "candidates")?;
        for b in 0..plus.table.len().min(MAX_BUCKETS) {
            for r in 0..k {
                let s = plus.candidates.get(b * plus.k + r).copied().unwrap_or(0);
                let key = (b * CANDIDATES + r) as u32;
                Self::put(&self.maps.candidates, "candidates", key, &s.to_ne_bytes())?;
            }
        }
        self.write_buckets(plus.table.entries())?;
        let mut cfg = self.read_config()?;
        cfg.candidates = k as u32;
        cfg.conn_budget = plus.conn_budget;
        self.write_config(&cfg)
    }

    /// Zeroes the per-core new-connection counts (start of an interval).
    pub fn reset_core_taken(&self, backends: usize) -> Result<(), LbXdpError> {
        for key in 0..(backends.min(MAX_BACKENDS) * MAX_CORES) as u32 {
            Self::put(&self.maps.core_taken, "core_taken", key, &ZERO)?;
        }
        Ok(())
    }

    /// Switches the mode and starts interval `epoch` (written last, after
    /// the tables it refers to).
    pub fn set_mode(&self, mode: Mode, epoch: u32) -> Result<(), LbXdpError> {
        let mut cfg = self.read_config()?;
        cfg.mode = mode as u32;
        cfg.epoch = epoch;
        self.write_config(&cfg)
    }

    fn check_slots(&self, slots: &[u32], what: &str) -> Result<(), LbXdpError> {
        match slots.iter().find(|&&s| s as usize >= MAX_BACKENDS) {
            Some(s) => Err(LbXdpError::config(format!(
                "{what} names backend {s}; slots are 0..{MAX_BACKENDS}"
            ))),
            None => Ok(()),
        }
    }

    /// Every CPU's value of entry `key` of per-CPU map `map` (`name`), as
    /// the program's own type.
    fn percpu<T: bytemuck::Pod>(
        map: &MapHandle,
        name: &str,
        key: u32,
    ) -> Result<Vec<T>, LbXdpError> {
        let values = map
            .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| LbXdpError::bpf(format!("read map {name}"), e))?;
        read_percpu(name, key, values)
    }

    /// All counters, summed over CPUs, for backend slots 0..backends.
    pub fn stats(&self, backends: usize) -> Result<LbStats, LbXdpError> {
        let mut out = LbStats::default();
        for slot in 0..STAT_NAMES.len() as u32 {
            let c: Vec<types::lbxdp_counters> = Self::percpu(&self.maps.stats, "stats", slot)?;
            out.packets.push(c.iter().map(|c| c.packets).sum());
        }
        for slot in 0..backends.min(MAX_BACKENDS) as u32 {
            let c: Vec<types::lbxdp_backend_counters> =
                Self::percpu(&self.maps.backend_stats, "backend_stats", slot)?;
            out.backend_packets.push(c.iter().map(|c| c.packets).sum());
            out.backend_new_conns
                .push(c.iter().map(|c| c.new_conns).sum());
        }
        Ok(out)
    }

    /// Per bucket: (new connections, packets of connections created in the
    /// current epoch), cumulative.
    pub fn bucket_counters(&self, buckets: usize) -> Result<Vec<(u64, u64)>, LbXdpError> {
        (0..buckets.min(MAX_BUCKETS) as u32)
            .map(|b| {
                let c: Vec<types::lbxdp_bucket_counters> =
                    Self::percpu(&self.maps.bucket_stats, "bucket_stats", b)?;
                Ok((
                    c.iter().map(|c| c.new_conns).sum(),
                    c.iter().map(|c| c.new_packets).sum(),
                ))
            })
            .collect()
    }

    /// Entries of the connection table, with the backend of each.
    pub fn connections(&self) -> Vec<(types::lbxdp_conn_key, types::lbxdp_conn)> {
        self.maps
            .conns
            .keys()
            .filter_map(|k| {
                let v = self.maps.conns.lookup(&k, MapFlags::ANY).ok()??;
                Some((
                    bytemuck::try_pod_read_unaligned(&k).ok()?,
                    bytemuck::try_pod_read_unaligned(&v).ok()?,
                ))
            })
            .collect()
    }

    /// Attaches the load balancer to `dev` in `netns` (native XDP), and the
    /// pass-through program to the veth peer `peer` in `peer_netns`, which
    /// makes that end accept the load balancer's XDP_TX frames.
    pub fn attach(
        &self,
        dev: &str,
        netns: &str,
        peer: Option<(&str, &str)>,
    ) -> Result<(), LbXdpError> {
        if let Some((pns, pdev)) = peer {
            attach_fd(&self.pass_prog, pdev, pns)?;
        }
        attach_fd(&self.prog, dev, netns)
    }

    /// Runs the program once on `frame` (BPF_PROG_TEST_RUN): the XDP verdict
    /// and the frame as the program left it. Maps are the live ones.
    pub fn test_run(&self, frame: &[u8]) -> Result<(u32, Vec<u8>), LbXdpError> {
        let mut out = vec![0u8; frame.len() + 256];
        // SAFETY: zeroed is a valid bpf_test_run_opts; sz is set as libbpf
        // requires; data_in/data_out point to live buffers of the sizes given.
        let mut opts = unsafe { std::mem::zeroed::<libbpf_rs::libbpf_sys::bpf_test_run_opts>() };
        opts.sz = size_of_val(&opts) as _;
        opts.data_in = frame.as_ptr().cast();
        opts.data_size_in = frame.len() as u32;
        opts.data_out = out.as_mut_ptr().cast();
        opts.data_size_out = out.len() as u32;
        opts.repeat = 1;
        // SAFETY: the fd is our program's; opts is valid for the call.
        let ret = unsafe {
            libbpf_rs::libbpf_sys::bpf_prog_test_run_opts(self.prog.as_raw_fd(), &mut opts)
        };
        if ret < 0 {
            return Err(LbXdpError::io(
                "BPF_PROG_TEST_RUN",
                std::io::Error::from_raw_os_error(-ret),
            ));
        }
        out.truncate(opts.data_size_out as usize);
        Ok((opts.retval, out))
    }

    /// Number of possible CPUs (per-CPU map width).
    pub fn cpus(&self) -> usize {
        self.cpus
    }
}

fn attach_fd(prog: &OwnedFd, dev: &str, netns: &str) -> Result<(), LbXdpError> {
    let fd = prog
        .try_clone()
        .map_err(|e| LbXdpError::io("dup program fd", e))?;
    let d = dev.to_string();
    host::netns::run_in(Some(netns), move || match if_index(&d) {
        Some(i) => Xdp::new(fd.as_fd())
            .attach(i as i32, XdpFlags::DRV_MODE)
            .map_err(|e| format!("attach XDP to {d}: {e}")),
        None => Err(format!("no device {d}")),
    })?
    .map_err(|reason| LbXdpError::KernelFeature { what: reason })
}

/// Detaches whatever XDP program runs on `dev` in `netns` (a missing
/// namespace or device is fine: nothing is attached there any more).
pub fn detach(dev: &str, netns: &str) {
    let d = dev.to_string();
    let _ = host::netns::run_in(Some(netns), move || {
        if let Some(i) = if_index(&d) {
            // SAFETY: a plain netlink request; NULL options are allowed.
            unsafe {
                libbpf_rs::libbpf_sys::bpf_xdp_detach(
                    i as i32,
                    XdpFlags::DRV_MODE.bits(),
                    std::ptr::null(),
                )
            };
        }
    });
}

pub(crate) fn if_index(dev: &str) -> Option<u32> {
    let name = std::ffi::CString::new(dev).ok()?;
    // SAFETY: a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (i != 0).then_some(i)
}

/// `values` (what `lookup_percpu` returned for entry `key` of map `name`)
/// read as the program's type `T`, one per CPU: a missing entry or a value
/// of another size is an error, never a count of 0.
fn read_percpu<T: bytemuck::Pod>(
    name: &str,
    key: u32,
    values: Option<Vec<Vec<u8>>>,
) -> Result<Vec<T>, LbXdpError> {
    host::bpf::percpu_values(name, key, values).map_err(|e| nic::NicError::from(e).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counters are read as the program's structs. The old reading
    /// took words one by one and skipped those a value lacked: a backend
    /// value of 16 bytes (another build of the program) gave new
    /// connections 0.
    #[test]
    fn a_counter_value_of_another_size_is_an_error() {
        let short = Some(vec![vec![0u8; 16]]);
        let err = read_percpu::<types::lbxdp_backend_counters>("backend_stats", 1, short)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "BPF map backend_stats entry 1 is unreadable: the value of CPU 0 is 16 bytes, expected 32"
        );
        let whole = vec![0u8; std::mem::size_of::<types::lbxdp_backend_counters>()];
        let read =
            read_percpu::<types::lbxdp_backend_counters>("backend_stats", 1, Some(vec![whole]));
        assert_eq!(read.map(|v| v.len()).ok(), Some(1));
        assert!(read_percpu::<types::lbxdp_bucket_counters>("bucket_stats", 0, None).is_err());
    }
}

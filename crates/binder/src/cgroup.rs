//! The cgroup binder's control plane: loads `bpf/connect.bpf.c`, attaches
//! its connect4/connect6 programs to a cgroup v2 directory, writes port
//! plans into its `plans` map, pins the attachment so it outlives the
//! process (`/sys/fs/bpf/steer/cgroup/<cgroup path, escaped>/`), and makes
//! throwaway cgroups for `steer exec --bpf`.

use std::fs::File;
use std::io::Write;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_rs::skel::SkelBuilder;
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle};
use serde::Serialize;

use crate::error::BinderError;
use srap::Plan;

host::bpf_skeleton!(
    "connect.skel.rs",
    pod: [
        binder_dest,
        binder_plan,
        binder_host,
        binder_counter,
    ]
);
use skel::types;

/// The constants of `bpf/binder.h`, generated from it by build.rs.
mod abi {
    include!(concat!(env!("OUT_DIR"), "/binder_h.rs"));
}

/// Limits of the BPF program (`bpf/binder.h`).
pub const MAX_PORTS: usize = abi::BINDER_MAX_PORTS as usize;
pub const MAX_TRIES: u32 = abi::BINDER_MAX_TRIES;
/// Root of the cgroup binder's pins.
pub const PIN_ROOT: &str = "/sys/fs/bpf/steer/cgroup";

const FAMILY_V4: u8 = abi::BINDER_FAMILY_V4 as u8;
const FAMILY_V6: u8 = abi::BINDER_FAMILY_V6 as u8;
const PIN_NAMES: [&str; 5] = ["connect4", "connect6", "plans", "counters", "stats"];

/// What the programs did (sums over CPUs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BinderStats {
    /// Connects bound to a planned port.
    pub bound: u64,
    /// bpf_bind attempts that failed (port in use, address not local).
    pub bind_failed: u64,
    /// Connects left to the kernel after every attempt failed.
    pub fallback: u64,
    /// TCP connects to destinations without a plan.
    pub no_plan: u64,
    /// Connects not touched: not TCP, already bound, IPv4-mapped IPv6.
    pub skipped: u64,
}

/// One line: `3 bound, 0 bind failures, 0 fallbacks, 1 without plan, 0 skipped`.
impl std::fmt::Display for BinderStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bound, {} bind failures, {} fallbacks, {} without plan, {} skipped",
            self.bound, self.bind_failed, self.fallback, self.no_plan, self.skipped
        )
    }
}

impl BinderStats {
    /// The events since `before` (an earlier read of the same binder).
    pub fn since(&self, before: &BinderStats) -> BinderStats {
        BinderStats {
            bound: self.bound.saturating_sub(before.bound),
            bind_failed: self.bind_failed.saturating_sub(before.bind_failed),
            fallback: self.fallback.saturating_sub(before.fallback),
            no_plan: self.no_plan.saturating_sub(before.no_plan),
            skipped: self.skipped.saturating_sub(before.skipped),
        }
    }

    /// `Ok` when each of `connects` connects to a destination with a plan
    /// took a planned port (none left to the kernel, none without a plan):
    /// a measurement of the binding path must see this, else it measured
    /// the fallback. The error says what the program did instead.
    pub fn all_bound(&self, connects: u64) -> Result<(), String> {
        let others = self.fallback + self.no_plan + self.skipped;
        if self.bound == connects && others == 0 {
            Ok(())
        } else {
            Err(format!(
                "of {connects} connects with a plan, {self} (all should have bound)"
            ))
        }
    }

    /// `Ok` when each of `connects` connects to a destination without a
    /// plan was left to the kernel after the lookup (none bound).
    pub fn none_planned(&self, connects: u64) -> Result<(), String> {
        if self.no_plan == connects && self.bound + self.fallback + self.skipped == 0 {
            Ok(())
        } else {
            Err(format!(
                "of {connects} connects without a plan, {self} (all should be without plan)"
            ))
        }
    }
}

fn addr_bytes(ip: IpAddr) -> ([u8; 16], u8) {
    let mut out = [0u8; 16];
    match ip {
        IpAddr::V4(a) => {
            out[..4].copy_from_slice(&a.octets());
            (out, FAMILY_V4)
        }
        IpAddr::V6(a) => (a.octets(), FAMILY_V6),
    }
}

/// The mount point of the cgroup v2 hierarchy (`/sys/fs/cgroup` on a
/// unified system, `/sys/fs/cgroup/unified` on a hybrid one).
pub fn cgroup2_root() -> Result<PathBuf, BinderError> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")
        .map_err(|e| BinderError::io("read /proc/self/mounts", e))?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (_, dir, fs) = (it.next()?, it.next()?, it.next()?);
            (fs == "cgroup2").then(|| PathBuf::from(dir))
        })
        .next()
        .ok_or(BinderError::NoCgroup2)
}

fn is_cgroup2(path: &Path) -> bool {
    // CGROUP2_SUPER_MAGIC
    const MAGIC: i64 = 0x6367_7270;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs writes into the zeroed struct; the path is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0) && st.f_type as i64 == MAGIC
}

fn open_cgroup(path: &Path) -> Result<(File, PathBuf), BinderError> {
    let canonical = std::fs::canonicalize(path)
        .map_err(|e| BinderError::io(format!("cgroup {}", path.display()), e))?;
    if !is_cgroup2(&canonical) {
        return Err(BinderError::NotACgroup {
            path: path.display().to_string(),
        });
    }
    let f = File::open(&canonical)
        .map_err(|e| BinderError::io(format!("open cgroup {}", canonical.display()), e))?;
    Ok((f, canonical))
}

/// The pin directory of a cgroup: its canonical path with `%` and `/`
/// escaped, so distinct cgroups never share a directory.
pub fn pin_dir(cgroup: &Path) -> Result<PathBuf, BinderError> {
    let canonical = std::fs::canonicalize(cgroup)
        .map_err(|e| BinderError::io(format!("cgroup {}", cgroup.display()), e))?;
    let text = canonical.display().to_string();
    let escaped = text.replace('%', "%25").replace('/', "%2F");
    Ok(Path::new(PIN_ROOT).join(escaped))
}

/// The programs attached to one cgroup, with handles on their maps.
pub struct CgroupBinder {
    cgroup: PathBuf,
    links: Vec<Link>,
    plans: MapHandle,
    counters: MapHandle,
    stats: MapHandle,
}

impl CgroupBinder {
    /// Loads the programs and attaches them to `cgroup` (a cgroup v2
    /// directory) for as long as the returned value lives (or, after
    /// [`CgroupBinder::pin`], until [`detach_pinned`]).
    pub fn attach(cgroup: &Path) -> Result<CgroupBinder, BinderError> {
        host::require_root("attach cgroup BPF programs")?;
        let (cg, canonical) = open_cgroup(cgroup)?;
        let mut storage = std::mem::MaybeUninit::uninit();
        let open = skel::ConnectSkelBuilder::default()
            .open(&mut storage)
            .map_err(|e| BinderError::bpf("open connect skeleton", e))?;
        let skel = nic::load_program(
            open,
            "the cgroup connect4/connect6 programs",
            "bpf_bind, atomics",
        )?;
        let handle = |map: &libbpf_rs::MapMut<'_>, name: &str| {
            MapHandle::try_from(map).map_err(|e| BinderError::bpf(format!("dup map {name}"), e))
        };
        let plans = handle(&skel.maps.plans, "plans")?;
        let counters = handle(&skel.maps.counters, "counters")?;
        let stats = handle(&skel.maps.stats, "stats")?;
        let attach = |prog: &libbpf_rs::ProgramMut<'_>, name: &str| {
            prog.attach_cgroup(cg.as_raw_fd()).map_err(|e| {
                BinderError::bpf(
                    format!("attach {name} to cgroup {}", canonical.display()),
                    e,
                )
            })
        };
        let links = vec![
            attach(&skel.progs.steer_connect4, "connect4")?,
            attach(&skel.progs.steer_connect6, "connect6")?,
        ];
        Ok(CgroupBinder {
            cgroup: canonical,
            links,
            plans,
            counters,
            stats,
        })
    }

    /// The attachment pinned for `cgroup` by an earlier [`CgroupBinder::pin`].
    pub fn open_pinned(cgroup: &Path) -> Result<CgroupBinder, BinderError> {
        host::require_root("open the pinned cgroup binder")?;
        let dir = pin_dir(cgroup)?;
        let not_attached = || BinderError::NotAttached {
            path: cgroup.display().to_string(),
            pins: dir.display().to_string(),
        };
        if !dir.join("connect4").exists() {
            return Err(not_attached());
        }
        let map = |name: &str| {
            MapHandle::from_pinned_path(dir.join(name))
                .map_err(|e| BinderError::bpf(format!("open pinned map {name}"), e))
        };
        let link = |name: &str| {
            Link::open(dir.join(name))
                .map_err(|e| BinderError::bpf(format!("open pinned link {name}"), e))
        };
        Ok(CgroupBinder {
            cgroup: std::fs::canonicalize(cgroup)
                .map_err(|e| BinderError::io(format!("cgroup {}", cgroup.display()), e))?,
            links: vec![link("connect4")?, link("connect6")?],
            plans: map("plans")?,
            counters: map("counters")?,
            stats: map("stats")?,
        })
    }

    /// The binder pinned for `cgroup`, or, when none is, one attached and
    /// pinned there now (`steer attach`, run again to add destinations).
    pub fn open_or_attach_pinned(cgroup: &Path) -> Result<CgroupBinder, BinderError> {
        match CgroupBinder::open_pinned(cgroup) {
            Err(BinderError::NotAttached { .. }) => {
                let mut binder = CgroupBinder::attach(cgroup)?;
                binder.pin()?;
                Ok(binder)
            }
            opened => opened,
        }
    }

    /// Pins links and maps so the attachment outlives this process.
    pub fn pin(&mut self) -> Result<PathBuf, BinderError> {
        let dir = pin_dir(&self.cgroup)?;
        std::fs::create_dir_all(&dir)
            .map_err(|e| BinderError::io(format!("create {}", dir.display()), e))?;
        for (link, name) in self.links.iter_mut().zip(["connect4", "connect6"]) {
            link.pin(dir.join(name))
                .map_err(|e| BinderError::bpf(format!("pin link {name}"), e))?;
        }
        for (map, name) in [
            (&self.plans, "plans"),
            (&self.counters, "counters"),
            (&self.stats, "stats"),
        ] {
            let path = dir.join(name);
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
                .map_err(|_| BinderError::Plan(format!("bad pin path {}", path.display())))?;
            // SAFETY: a valid map fd and a NUL-terminated path.
            let r =
                unsafe { libbpf_rs::libbpf_sys::bpf_obj_pin(map.as_fd().as_raw_fd(), c.as_ptr()) };
            if r < 0 {
                return Err(BinderError::io(
                    format!("pin map {}", path.display()),
                    std::io::Error::from_raw_os_error(-r),
                ));
            }
        }
        Ok(dir)
    }

    /// The canonical cgroup path.
    pub fn cgroup(&self) -> &Path {
        &self.cgroup
    }

    /// Installs (or replaces) the plan for one destination, and creates the
    /// destination host's slot counter if it has none. The plan's entries
    /// are the slots in order; [`srap::plan`] gives every remote port of one
    /// receiver the same queue sequence, so the per-host counter keeps
    /// spreading connections over queues across destination ports.
    pub fn set_plan(&self, plan: &Plan) -> Result<(), BinderError> {
        let ports: Vec<u16> = plan.entries.iter().map(|e| e.port).collect();
        self.set_ports(
            plan.local,
            std::net::SocketAddr::new(plan.remote, plan.remote_port),
            &ports,
        )
    }

    /// Installs `ports` (slots in order) for connects to `remote` from
    /// `local` (the unspecified address: bind the wildcard, routing picks).
    pub fn set_ports(
        &self,
        local: IpAddr,
        remote: std::net::SocketAddr,
        ports: &[u16],
    ) -> Result<(), BinderError> {
        if ports.is_empty() || ports.len() > MAX_PORTS {
            return Err(BinderError::Plan(format!(
                "{} ports: the cgroup binder takes 1..={MAX_PORTS}",
                ports.len()
            )));
        }
        let (remote_bytes, family) = addr_bytes(remote.ip());
        let (local, local_family) = addr_bytes(local);
        if local_family != family {
            return Err(BinderError::Plan(
                "local and remote addresses differ in family".into(),
            ));
        }
        let remote_port = remote.port();
        let remote = remote_bytes;
        let dest = types::binder_dest {
            addr: remote,
            port: u16::from_ne_bytes(remote_port.to_be_bytes()),
            family,
            pad: 0,
        };
        let mut value = types::binder_plan {
            local,
            count: ports.len() as u32,
            pad: 0,
            ports: [0; MAX_PORTS],
        };
        value.ports[..ports.len()].copy_from_slice(ports);
        self.plans
            .update(
                bytemuck::bytes_of(&dest),
                bytemuck::bytes_of(&value),
                MapFlags::ANY,
            )
            .map_err(|e| BinderError::bpf("write map plans", e))?;
        let host = types::binder_host {
            addr: remote,
            family,
            pad: [0; 3],
        };
        let zero = types::binder_counter { next: 0 };
        match self.counters.update(
            bytemuck::bytes_of(&host),
            bytemuck::bytes_of(&zero),
            MapFlags::NO_EXIST,
        ) {
            Err(e) if e.kind() != libbpf_rs::ErrorKind::AlreadyExists => {
                Err(BinderError::bpf("write map counters", e))
            }
            _ => Ok(()),
        }
    }

    /// Removes every plan and counter (connects then get kernel ports).
    pub fn clear_plans(&self) -> Result<(), BinderError> {
        for map in [&self.plans, &self.counters] {
            let keys: Vec<Vec<u8>> = map.keys().collect();
            for k in keys {
                match map.delete(&k) {
                    Err(e) if e.kind() != libbpf_rs::ErrorKind::NotFound => {
                        return Err(BinderError::bpf("clear plans", e))
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Number of destinations with a plan.
    pub fn plan_count(&self) -> usize {
        self.plans.keys().count()
    }

    /// Event counts, summed over CPUs.
    pub fn stats(&self) -> Result<BinderStats, BinderError> {
        let mut v = [0u64; 5];
        for (i, slot) in v.iter_mut().enumerate() {
            let per_cpu = self
                .stats
                .lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| BinderError::bpf("read map stats", e))?;
            // A value that cannot be read is an unknown count, not 0.
            *slot =
                host::bpf::event_count("stats", i as u32, per_cpu).map_err(nic::NicError::from)?;
        }
        Ok(BinderStats {
            bound: v[0],
            bind_failed: v[1],
            fallback: v[2],
            no_plan: v[3],
            skipped: v[4],
        })
    }
}

/// Detaches the pinned attachment of `cgroup` and removes its pins.
pub fn detach_pinned(cgroup: &Path) -> Result<(), BinderError> {
    host::require_root("detach the cgroup binder")?;
    let dir = pin_dir(cgroup)?;
    if !dir.join("connect4").exists() && !dir.join("connect6").exists() {
        let _ = std::fs::remove_dir(&dir);
        return Err(BinderError::NotAttached {
            path: cgroup.display().to_string(),
            pins: dir.display().to_string(),
        });
    }
    for name in ["connect4", "connect6"] {
        if let Ok(link) = Link::open(dir.join(name)) {
            link.detach()
                .map_err(|e| BinderError::bpf(format!("detach link {name}"), e))?;
        }
    }
    for name in PIN_NAMES {
        match std::fs::remove_file(dir.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(BinderError::io(format!("remove pin {name}"), e))
            }
            _ => {}
        }
    }
    std::fs::remove_dir(&dir).map_err(|e| BinderError::io(format!("remove {}", dir.display()), e))
}

/// A cgroup made for one command, removed on drop.
pub struct TempCgroup {
    path: PathBuf,
}

impl TempCgroup {
    /// Creates `<cgroup2 root>/steer-<pid>-<n>`.
    pub fn create() -> Result<TempCgroup, BinderError> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        host::require_root("create a cgroup")?;
        let root = cgroup2_root()?;
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = root.join(format!("steer-{}-{n}", std::process::id()));
        std::fs::create_dir(&path)
            .map_err(|e| BinderError::io(format!("create cgroup {}", path.display()), e))?;
        Ok(TempCgroup { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the child move itself into this cgroup before it executes (so
    /// its very first connect is already in the cgroup).
    pub fn enter_in_child(&self, cmd: &mut Command) -> Result<(), BinderError> {
        let procs = self.path.join("cgroup.procs");
        let fd: OwnedFd = std::fs::OpenOptions::new()
            .write(true)
            .open(&procs)
            .map_err(|e| BinderError::io(format!("open {}", procs.display()), e))?
            .into();
        // SAFETY: the closure only calls write(2) on an fd it owns
        // (async-signal-safe). "0" moves the writing process.
        unsafe {
            cmd.pre_exec(move || {
                if libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }

    /// Moves process `pid` into this cgroup.
    pub fn add(&self, pid: u32) -> Result<(), BinderError> {
        let procs = self.path.join("cgroup.procs");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&procs)
            .and_then(|mut f| f.write_all(pid.to_string().as_bytes()))
            .map_err(|e| BinderError::io(format!("write {}", procs.display()), e))
    }
}

impl Drop for TempCgroup {
    fn drop(&mut self) {
        // Processes the command left behind keep the cgroup busy; give them
        // a moment, then leave it (and say so).
        for _ in 0..50 {
            match std::fs::remove_dir(&self.path) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
        eprintln!(
            "steer: cgroup {} still has processes; not removed",
            self.path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planned_run_is_all_bound_and_an_unplanned_one_is_all_without_plan() {
        let bound = BinderStats {
            bound: 6,
            bind_failed: 2,
            ..BinderStats::default()
        };
        assert_eq!(bound.all_bound(6), Ok(()));
        // A connect that fell back, or one fewer counted: not all bound.
        let fell_back = BinderStats {
            bound: 5,
            fallback: 1,
            ..BinderStats::default()
        };
        let err = fell_back.all_bound(6).unwrap_err();
        assert!(
            err.contains("5 bound") && err.contains("1 fallbacks"),
            "{err}"
        );
        assert!(bound.all_bound(7).is_err());
        let unplanned = BinderStats {
            no_plan: 6,
            ..BinderStats::default()
        };
        assert_eq!(unplanned.none_planned(6), Ok(()));
        assert!(unplanned.all_bound(6).is_err());
        assert!(bound.none_planned(6).is_err());
    }

    #[test]
    #[ignore = "needs root (cgroup BPF)"]
    fn a_pinned_binder_is_opened_again_until_detached() {
        testkit::require_root("cgroup BPF");
        let cgroup = TempCgroup::create().unwrap();
        let first = CgroupBinder::open_or_attach_pinned(cgroup.path()).unwrap();
        let to = "10.0.0.2:80".parse().unwrap();
        first
            .set_ports("10.0.0.1".parse().unwrap(), to, &[40000])
            .unwrap();
        drop(first);
        // The pinned attachment, with its plan; not a second one.
        let again = CgroupBinder::open_or_attach_pinned(cgroup.path()).unwrap();
        assert_eq!(again.plan_count(), 1);
        drop(again);
        detach_pinned(cgroup.path()).unwrap();
        assert!(matches!(
            CgroupBinder::open_pinned(cgroup.path()),
            Err(BinderError::NotAttached { .. })
        ));
    }
}

//! The CPUs an experiment runs on: how many are present (what the
//! layouts that scale are derived from) and where it pins its threads,
//! both named in its result.

use std::collections::BTreeMap;

use serde::Serialize;

/// The CPUs this process may run on (its affinity mask, less any cgroup
/// quota): what `stats::Meta::cores` records, and what a command that
/// scales with the host derives its thread counts from.
pub fn present() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Keeps the calling thread on `cpu` when the process may run there. A
/// host without it leaves the thread where the scheduler puts it: the
/// placement is a preference, not a condition of the measurement, and the
/// result says which held ([`PinnedCpus`]).
pub fn pin(cpu: usize) {
    let _ = host::cpu::pin_current_thread(cpu);
}

/// The CPU each role of an experiment's threads was pinned to, as its
/// result names them (`{"data_path": 1, "clients": 0}`): null for a role
/// whose CPU this process may not run on, whose threads then ran where
/// the scheduler put them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct PinnedCpus(BTreeMap<&'static str, Option<usize>>);

impl PinnedCpus {
    /// `roles`, each with the CPU its threads are [`pin`]ned to, as this
    /// host allows them.
    pub fn of(roles: &[(&'static str, usize)]) -> PinnedCpus {
        PinnedCpus::allowed(roles, host::cpu::allowed_cpus().as_deref())
    }

    /// `roles` against the CPUs `allowed` (None: the mask could not be
    /// read, so no pin is known to have held).
    fn allowed(roles: &[(&'static str, usize)], allowed: Option<&[usize]>) -> PinnedCpus {
        PinnedCpus(
            roles
                .iter()
                .map(|&(role, cpu)| (role, allowed.filter(|a| a.contains(&cpu)).map(|_| cpu)))
                .collect(),
        )
    }

    /// The CPU of `role`, if its threads were pinned.
    pub fn get(&self, role: &str) -> Option<usize> {
        self.0.get(role).copied().flatten()
    }
}

/// Sets `rps_cpus` of every receive queue of the receiving veth to `cpus`
/// (empty: RPS off) and its `rps_flow_cnt` to `flow_cnt` (0: RFS off).
/// Written through the namespace's own sysfs, which shows its devices.
pub(crate) fn set_rps(lab: &lab::Lab, cpus: &[u32], flow_cnt: u32) -> Result<(), crate::ExpError> {
    let rcv = lab.receiver();
    let sysfs = host::sysfs::Sysfs::of(&rcv.netns).map_err(lab::LabError::from)?;
    let queues = format!("class/net/{}/queues", rcv.dev);
    let (mask, flow_cnt) = (
        rss::live::files::format_cpu_mask(cpus),
        flow_cnt.to_string(),
    );
    for queue in sysfs.list(&queues).map_err(lab::LabError::from)? {
        if queue.starts_with("rx-") {
            sysfs
                .write(&format!("{queues}/{queue}/rps_cpus"), &mask)
                .and_then(|()| sysfs.write(&format!("{queues}/{queue}/rps_flow_cnt"), &flow_cnt))
                .map_err(lab::LabError::from)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_names_its_cpu_where_the_host_has_it() {
        let roles = [("data_path", 1), ("clients", 0)];
        let two = PinnedCpus::allowed(&roles, Some(&[0, 1]));
        assert_eq!(
            serde_json::to_value(&two).unwrap(),
            serde_json::json!({"data_path": 1, "clients": 0})
        );
        // One CPU: the data path's pin to CPU 1 cannot hold.
        let one = PinnedCpus::allowed(&roles, Some(&[0]));
        assert_eq!((one.get("data_path"), one.get("clients")), (None, Some(0)));
        assert_eq!(PinnedCpus::allowed(&roles, None).get("clients"), None);
        assert!(present() >= 1);
    }
}

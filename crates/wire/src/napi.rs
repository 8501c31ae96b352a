//! Threaded NAPI on the driver's TAP, so that GRO sees a whole batch
//! (`/sys/class/net/DEV/threaded`, Documentation/networking/napi.rst,
//! "Threaded NAPI").
//!
//! With IFF_NAPI a TAP write queues the frame on the tun file's queue and
//! calls `napi_schedule` (drivers/net/tun.c, `tun_get_user`). In the
//! default softirq mode the NET_RX softirq then runs at the write's own
//! `local_bh_enable`: `tun_napi_receive` finds that one frame and
//! `napi_complete_done` flushes GRO after it, so nothing ever merges. In
//! threaded mode `napi_schedule` wakes the device's kernel thread
//! (`napi/DEV-ID`) instead. Pinned to the driver's CPU, that thread
//! (SCHED_OTHER) cannot run while the driver (SCHED_FIFO) writes a batch;
//! its next poll splices the whole batch off the queue at once, GRO merges
//! across it and flushes when the poll completes: what a NIC driver's NAPI
//! poll does with a batch from its ring (SRPIC paper, section 3.3: the
//! sorted block goes up the stack in one softirq).

use std::collections::BTreeSet;

use crate::WireError;

/// Longest task name the kernel keeps (TASK_COMM_LEN 16, with the NUL).
const COMM_LEN: usize = 15;

/// The name prefix of `dev`'s NAPI threads (`napi/DEV-`), cut as the
/// kernel cuts task names.
pub(crate) fn kthread_prefix(dev: &str) -> String {
    let mut p = format!("napi/{dev}-");
    p.truncate(COMM_LEN);
    p
}

/// Tasks whose name starts with `prefix` (from /proc/PID/comm).
fn tasks_named(prefix: &str) -> Result<BTreeSet<i32>, WireError> {
    let dir = std::fs::read_dir("/proc").map_err(|e| WireError::Io {
        op: "read /proc".into(),
        source: e,
    })?;
    let mut out = BTreeSet::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        // A task may exit between the listing and the read: not ours.
        if let Ok(comm) = std::fs::read_to_string(entry.path().join("comm")) {
            if comm.trim_end().starts_with(prefix) {
                out.insert(pid);
            }
        }
    }
    Ok(out)
}

/// The one task in `after` and not in `before`; an error naming `dev`
/// when there is none or more than one.
fn the_new_task(
    dev: &str,
    before: &BTreeSet<i32>,
    after: &BTreeSet<i32>,
) -> Result<i32, WireError> {
    let new: Vec<i32> = after.difference(before).copied().collect();
    match new[..] {
        [tid] => Ok(tid),
        _ => Err(WireError::Config(format!(
            "threaded NAPI on {dev}: expected one new kernel thread '{}*', found {}",
            kthread_prefix(dev),
            new.len()
        ))),
    }
}

/// Turns threaded NAPI on for `dev` in `netns` and returns the id of the
/// kernel thread that now polls it. Written through the namespace's own
/// sysfs, which shows its devices.
pub(crate) fn enable_threaded(netns: &str, dev: &str) -> Result<i32, WireError> {
    let prefix = kthread_prefix(dev);
    let before = tasks_named(&prefix)?;
    host::sysfs::Sysfs::of(netns)?.write(&format!("class/net/{dev}/threaded"), "1")?;
    the_new_task(dev, &before, &tasks_named(&prefix)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_cut_like_a_task_name() {
        assert_eq!(kthread_prefix("srpic0"), "napi/srpic0-");
        assert_eq!(kthread_prefix("averylongname0"), "napi/averylongn");
    }

    #[test]
    fn exactly_one_new_thread_is_the_poller() {
        let set = |v: &[i32]| v.iter().copied().collect::<BTreeSet<i32>>();
        assert_eq!(the_new_task("t", &set(&[5]), &set(&[5, 9])).unwrap(), 9);
        let none = the_new_task("t", &set(&[5]), &set(&[5])).unwrap_err();
        assert!(none.to_string().contains("found 0"), "{none}");
        let two = the_new_task("t", &set(&[]), &set(&[7, 9])).unwrap_err();
        assert!(two.to_string().contains("found 2"), "{two}");
    }

    #[test]
    fn this_process_is_found_by_its_name() {
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
        let found = tasks_named(comm.trim_end()).unwrap();
        assert!(found.contains(&(std::process::id() as i32)));
    }
}

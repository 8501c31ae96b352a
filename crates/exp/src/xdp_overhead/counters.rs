//! Where frames are lost on the lab's path, read from the datapath before
//! and after every iperf3 run of `steer exp xdp-overhead`:
//!
//! - the sender's veth (`IFLA_STATS64`: tx dropped): with an XDP program on
//!   the receiving veth, frames wait in that veth's NAPI ring (256 entries,
//!   drivers/net/veth.c `VETH_RING_SIZE`), and a full ring drops them here
//!   unless a qdisc on the sender lets the ring stop the queue instead;
//! - the sender's qdisc (`RTM_GETQDISC`): its drops, and its requeues, the
//!   times the full ring pushed back instead of dropping;
//! - the receiver's veth (rx dropped);
//! - the per-CPU backlogs (`/proc/net/softnet_stat`, column 2: a full
//!   `netdev_max_backlog` queue, where RPS and the no-program path enqueue);
//! - the cpumap (`nic::stats`: the kernel's xdp_cpumap_enqueue and
//!   xdp_cpumap_kthread tracepoints, counted for this attachment only).
//!
//! The parsers are pure, so they are tested on captured output.

use serde::Serialize;

use crate::ExpError;

/// Absolute counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub sender_tx_dropped: u64,
    pub receiver_rx_dropped: u64,
    /// `None` when the sender has no qdisc (veth's default, noqueue).
    pub sender_qdisc: Option<QdiscCounters>,
    pub backlog_dropped: u64,
    /// `None` when the software RSS is not attached.
    pub cpumap: Option<CpumapCounters>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QdiscCounters {
    pub drops: u64,
    pub requeues: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpumapCounters {
    pub enqueued: u64,
    pub enqueue_drops: u64,
    pub kthread_drops: u64,
}

/// What was lost where during one run (after minus before).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Drops {
    /// Frames the sender's veth dropped because the receiver's ring was full.
    pub sender_tx_dropped: u64,
    /// Frames the receiving veth dropped.
    pub receiver_rx_dropped: u64,
    /// Packets the sender's qdisc dropped; null without a qdisc.
    pub sender_qdisc_dropped: Option<u64>,
    /// Times the full ring stopped the sender's qdisc (back-pressure, not
    /// loss); null without a qdisc.
    pub sender_qdisc_requeues: Option<u64>,
    /// Backlog drops, all CPUs (machine-wide: `/proc/net/softnet_stat` is
    /// not per namespace).
    pub backlog_dropped: u64,
    /// Frames redirected into the cpumap; null without the program.
    pub cpumap_enqueued: Option<u64>,
    /// Frames the cpumap dropped because a CPU's ring was full; null
    /// without the program.
    pub cpumap_enqueue_drops: Option<u64>,
    /// Frames the cpumap kthreads dropped; null without the program.
    pub cpumap_kthread_drops: Option<u64>,
}

impl Drops {
    /// Frames lost anywhere on the path (the qdisc requeues are not losses).
    /// A counter that is absent belongs to a stage this mode does not have
    /// (no sender qdisc, no program), where nothing can be lost; `delta`
    /// refuses a counter that was there for only part of a run.
    pub fn total(&self) -> u64 {
        [
            Some(self.sender_tx_dropped),
            Some(self.receiver_rx_dropped),
            self.sender_qdisc_dropped,
            Some(self.backlog_dropped),
            self.cpumap_enqueue_drops,
            self.cpumap_kthread_drops,
        ]
        .into_iter()
        .flatten() // the counters of the stages this mode has
        .fold(0u64, u64::saturating_add)
    }

    /// Element-wise sum (a mode's samples); a field absent in either is
    /// absent.
    pub fn add(&self, o: &Drops) -> Drops {
        let opt = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
        Drops {
            sender_tx_dropped: self.sender_tx_dropped.saturating_add(o.sender_tx_dropped),
            receiver_rx_dropped: self
                .receiver_rx_dropped
                .saturating_add(o.receiver_rx_dropped),
            sender_qdisc_dropped: opt(self.sender_qdisc_dropped, o.sender_qdisc_dropped),
            sender_qdisc_requeues: opt(self.sender_qdisc_requeues, o.sender_qdisc_requeues),
            backlog_dropped: self.backlog_dropped.saturating_add(o.backlog_dropped),
            cpumap_enqueued: opt(self.cpumap_enqueued, o.cpumap_enqueued),
            cpumap_enqueue_drops: opt(self.cpumap_enqueue_drops, o.cpumap_enqueue_drops),
            cpumap_kthread_drops: opt(self.cpumap_kthread_drops, o.cpumap_kthread_drops),
        }
    }
}

/// `after - before`. A counter that went backwards was reset under the
/// run (a device or map recreated), so the run has no valid count.
pub fn delta(before: &Snapshot, after: &Snapshot) -> Result<Drops, ExpError> {
    let sub = |what: &str, a: u64, b: u64| {
        a.checked_sub(b).ok_or_else(|| {
            unreadable(
                "drop counters",
                format!("{what} went from {b} to {a} during a run (reset under it)"),
            )
        })
    };
    // Absent on both sides: the mode has no such stage (no qdisc, no
    // program). On one side only: it came or went during the run, which
    // leaves no count, not a zero.
    let opt = |what: &str, a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => sub(what, a, b).map(Some),
        (None, None) => Ok(None),
        _ => Err(unreadable(
            "drop counters",
            format!("{what} appeared or vanished during a run"),
        )),
    };
    let total = |what: &str, f: fn(&Snapshot) -> u64| sub(what, f(after), f(before));
    let qdisc = |what: &str, f: fn(&QdiscCounters) -> u64| {
        let of = |s: &Snapshot| s.sender_qdisc.as_ref().map(f);
        opt(what, of(after), of(before))
    };
    let cpumap = |what: &str, f: fn(&CpumapCounters) -> u64| {
        let of = |s: &Snapshot| s.cpumap.as_ref().map(f);
        opt(what, of(after), of(before))
    };
    Ok(Drops {
        sender_tx_dropped: total("sender tx dropped", |s| s.sender_tx_dropped)?,
        receiver_rx_dropped: total("receiver rx dropped", |s| s.receiver_rx_dropped)?,
        sender_qdisc_dropped: qdisc("qdisc drops", |q| q.drops)?,
        sender_qdisc_requeues: qdisc("qdisc requeues", |q| q.requeues)?,
        backlog_dropped: total("softnet dropped", |s| s.backlog_dropped)?,
        cpumap_enqueued: cpumap("cpumap enqueued", |c| c.enqueued)?,
        cpumap_enqueue_drops: cpumap("cpumap enqueue drops", |c| c.enqueue_drops)?,
        cpumap_kthread_drops: cpumap("cpumap kthread drops", |c| c.kthread_drops)?,
    })
}

fn unreadable(what: &str, detail: impl ToString) -> ExpError {
    ExpError::Program {
        program: what.to_string(),
        detail: detail.to_string(),
    }
}

/// `a + b`, or an error when counters from `program` add up past u64 (no
/// real counter does; the input is not what it claims to be).
fn checked_sum(a: u64, b: u64, program: &str) -> Result<u64, ExpError> {
    a.checked_add(b)
        .ok_or_else(|| unreadable(program, "counters add up past 2^64"))
}

/// Drops and requeues of a device's qdiscs (`host::link::qdiscs`), or
/// `None` when the root is `noqueue` (no queue, so nothing to stop). A
/// qdisc the kernel sent no queue counters for is an error, never a zero.
pub fn qdisc_counters(qdiscs: &[host::link::Qdisc]) -> Result<Option<QdiscCounters>, ExpError> {
    if qdiscs.is_empty() || qdiscs.iter().any(|q| q.kind == "noqueue") {
        return Ok(None);
    }
    let mut sum = QdiscCounters::default();
    for q in qdiscs {
        let queue = q
            .queue
            .ok_or_else(|| unreadable("RTM_GETQDISC", format!("{} has no TCA_STATS2", q.kind)))?;
        sum.drops += u64::from(queue.drops);
        sum.requeues += u64::from(queue.requeues);
    }
    Ok(Some(sum))
}

/// The dropped column (the second, hex) of `/proc/net/softnet_stat`, summed
/// over CPUs (one line each).
pub fn parse_softnet_dropped(text: &str) -> Result<u64, ExpError> {
    let mut sum = 0u64;
    for (i, line) in text.lines().enumerate() {
        let field = line.split_whitespace().nth(1).ok_or_else(|| {
            unreadable(
                "/proc/net/softnet_stat",
                format!("line {} has no column 2", i + 1),
            )
        })?;
        let dropped = u64::from_str_radix(field, 16)
            .map_err(|e| unreadable("/proc/net/softnet_stat", format!("line {}: {e}", i + 1)))?;
        sum = checked_sum(sum, dropped, "/proc/net/softnet_stat")?;
    }
    if sum == 0 && text.trim().is_empty() {
        return Err(unreadable("/proc/net/softnet_stat", "empty"));
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qdisc(kind: &str, queue: Option<(u32, u32)>) -> host::link::Qdisc {
        host::link::Qdisc {
            kind: kind.into(),
            handle: 0x8001_0000,
            parent: u32::MAX,
            limit: None,
            queue: queue.map(|(drops, requeues)| host::link::QdiscQueue {
                qlen: 0,
                backlog: 0,
                drops,
                requeues,
                overlimits: 0,
            }),
        }
    }

    #[test]
    fn qdisc_counters_sum_the_queues_and_noqueue_has_none() {
        let pfifo = [qdisc("pfifo", Some((2, 45371)))];
        let want = QdiscCounters {
            drops: 2,
            requeues: 45371,
        };
        assert_eq!(qdisc_counters(&pfifo).unwrap(), Some(want));
        let two = [
            qdisc("mq", Some((1, 1))),
            qdisc("pfifo", Some((u32::MAX, 2))),
        ];
        let sum = qdisc_counters(&two).unwrap().unwrap();
        assert_eq!((sum.drops, sum.requeues), (u64::from(u32::MAX) + 1, 3));
        assert_eq!(
            qdisc_counters(&[qdisc("noqueue", Some((0, 0)))]).unwrap(),
            None
        );
        assert_eq!(qdisc_counters(&[]).unwrap(), None);
        let e = qdisc_counters(&[qdisc("pfifo", None)]).unwrap_err();
        assert!(e.to_string().contains("TCA_STATS2"), "{e}");
    }

    #[test]
    fn softnet_dropped_is_column_two_in_hex() {
        let text = "0bf28a4d 0000001c 00000010 00000000\n0c97be48 000000ff 0000000f 00000000\n";
        assert_eq!(parse_softnet_dropped(text).unwrap(), 0x1c + 0xff);
        assert!(parse_softnet_dropped("0bf28a4d\n").is_err());
        assert!(parse_softnet_dropped("0bf28a4d zz\n").is_err());
        assert!(parse_softnet_dropped("").is_err());
        // Found by the datapath_counters fuzz target: a sum past u64 is an
        // error, not a panic.
        assert!(parse_softnet_dropped("0 ffffffffffffffff\n0 1\n").is_err());
    }

    #[test]
    fn delta_and_totals() {
        let before = Snapshot {
            sender_tx_dropped: 10,
            receiver_rx_dropped: 1,
            sender_qdisc: Some(QdiscCounters {
                drops: 0,
                requeues: 5,
            }),
            backlog_dropped: 100,
            cpumap: Some(CpumapCounters {
                enqueued: 1000,
                enqueue_drops: 3,
                kthread_drops: 0,
            }),
        };
        let mut after = before;
        after.sender_tx_dropped = 15;
        after.backlog_dropped = 102;
        after.sender_qdisc = Some(QdiscCounters {
            drops: 1,
            requeues: 9,
        });
        after.cpumap = Some(CpumapCounters {
            enqueued: 5000,
            enqueue_drops: 10,
            kthread_drops: 0,
        });
        let d = delta(&before, &after).unwrap();
        assert_eq!(d.sender_tx_dropped, 5);
        assert_eq!(d.sender_qdisc_requeues, Some(4));
        assert_eq!(d.cpumap_enqueued, Some(4000));
        assert_eq!(d.cpumap_enqueue_drops, Some(7));
        // 5 veth + 1 qdisc + 2 backlog + 7 cpumap; requeues are no loss.
        assert_eq!(d.total(), 15);
        let sum = d.add(&d);
        assert_eq!(sum.cpumap_enqueue_drops, Some(14));
        // A mode without the program has no cpumap counts: absent, not 0.
        let none = delta(&Snapshot::default(), &Snapshot::default()).unwrap();
        assert_eq!(none.cpumap_enqueue_drops, None);
        assert_eq!(d.add(&none).cpumap_enqueue_drops, None);
        // A counter that went backwards is an error.
        assert!(delta(&after, &before).is_err());
        // So is one there at the start and gone at the end (or the reverse).
        let mut gone = after;
        gone.cpumap = None;
        assert!(delta(&before, &gone).is_err());
        let mut came = before;
        came.sender_qdisc = None;
        assert!(delta(&came, &after).is_err());
    }
}

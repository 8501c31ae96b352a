//! Per-CPU softirq load from /proc: NET_RX softirq counts (/proc/softirqs)
//! and time spent in softirq context (/proc/stat), turned into rates between
//! two samples.
//!
//! Formats (Documentation/filesystems/proc.rst, fs/proc/softirqs.c,
//! fs/proc/stat.c): /proc/softirqs has a header `CPU0 CPU1 ...` and one row
//! per softirq (`NET_RX:` then one count per CPU column); /proc/stat has a
//! `cpuN` line per online CPU whose 7th number is softirq time in USER_HZ
//! ticks.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::api::CpuLoad;

/// A /proc file that cannot be read or parsed.
#[derive(Debug, Error)]
pub enum ProcError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse {what}: {reason}")]
    Parse { what: &'static str, reason: String },
}

impl ProcError {
    /// True when /proc refused us (CLI exit 3).
    pub fn is_environment(&self) -> bool {
        matches!(self, ProcError::Read { source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied)
    }

    /// Never bad input: /proc is the host's, not the user's (exit 1).
    pub fn is_bad_input(&self) -> bool {
        false
    }
}

fn parse_err(what: &'static str, reason: impl Into<String>) -> ProcError {
    ProcError::Parse {
        what,
        reason: reason.into(),
    }
}

/// NET_RX softirq counts per CPU, from the text of /proc/softirqs.
pub fn parse_softirqs(text: &str) -> Result<BTreeMap<u32, u64>, ProcError> {
    const WHAT: &str = "/proc/softirqs";
    let mut lines = text.lines();
    let header = lines.next().ok_or_else(|| parse_err(WHAT, "empty file"))?;
    let cpus: Vec<u32> = header
        .split_whitespace()
        .map(|col| {
            col.strip_prefix("CPU")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| parse_err(WHAT, format!("header column '{col}' is not CPUn")))
        })
        .collect::<Result<_, _>>()?;
    if cpus.is_empty() {
        return Err(parse_err(WHAT, "header names no CPU"));
    }
    let row = lines
        .find_map(|l| l.trim_start().strip_prefix("NET_RX:"))
        .ok_or_else(|| parse_err(WHAT, "no NET_RX row"))?;
    let counts: Vec<u64> = row
        .split_whitespace()
        .map(|n| {
            n.parse()
                .map_err(|_| parse_err(WHAT, format!("NET_RX count '{n}' is not a number")))
        })
        .collect::<Result<_, _>>()?;
    if counts.len() != cpus.len() {
        return Err(parse_err(
            WHAT,
            format!(
                "NET_RX has {} counts for {} CPU columns",
                counts.len(),
                cpus.len()
            ),
        ));
    }
    Ok(cpus.into_iter().zip(counts).collect())
}

/// Softirq time per CPU in USER_HZ ticks, from the text of /proc/stat.
pub fn parse_stat_softirq(text: &str) -> Result<BTreeMap<u32, u64>, ProcError> {
    const WHAT: &str = "/proc/stat";
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(label) = words.next() else { continue };
        let Some(cpu) = label.strip_prefix("cpu") else {
            continue;
        };
        if cpu.is_empty() {
            continue; // the aggregate "cpu" line
        }
        let cpu: u32 = cpu
            .parse()
            .map_err(|_| parse_err(WHAT, format!("'{label}' is not cpuN")))?;
        // user nice system idle iowait irq softirq ...
        let softirq = words
            .nth(6)
            .ok_or_else(|| parse_err(WHAT, format!("{label} has fewer than 7 columns")))?;
        let ticks = softirq
            .parse()
            .map_err(|_| parse_err(WHAT, format!("{label} softirq '{softirq}' is not a number")))?;
        out.insert(cpu, ticks);
    }
    if out.is_empty() {
        return Err(parse_err(WHAT, "no cpuN line"));
    }
    Ok(out)
}

/// Cumulative per-CPU counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcSample {
    /// NET_RX softirqs per CPU.
    pub net_rx: BTreeMap<u32, u64>,
    /// Softirq time per CPU, USER_HZ ticks.
    pub softirq_ticks: BTreeMap<u32, u64>,
}

impl ProcSample {
    /// Parses the texts of /proc/softirqs and /proc/stat.
    pub fn parse(softirqs: &str, stat: &str) -> Result<Self, ProcError> {
        Ok(ProcSample {
            net_rx: parse_softirqs(softirqs)?,
            softirq_ticks: parse_stat_softirq(stat)?,
        })
    }

    /// Reads the running kernel's counters.
    pub fn read() -> Result<Self, ProcError> {
        let read = |p: &str| {
            std::fs::read_to_string(p).map_err(|source| ProcError::Read {
                path: p.into(),
                source,
            })
        };
        Self::parse(&read("/proc/softirqs")?, &read("/proc/stat")?)
    }

    /// Per-CPU load: the totals of `self`, and the rates since `prev`
    /// (the earlier sample and how long before). CPUs are those of
    /// /proc/softirqs (every possible CPU); a CPU that is offline has no
    /// /proc/stat line and shows no softirq time. A rate is `None` without
    /// an earlier sample of that CPU or a positive interval, and when a
    /// counter went backwards (a CPU re-onlined): there is no interval to
    /// measure over, and 0 would read as an idle CPU.
    pub fn rates(&self, prev: Option<(&ProcSample, Duration)>, user_hz: u64) -> Vec<CpuLoad> {
        let hz = user_hz.max(1) as f64;
        let rate = |now: u64, before: Option<u64>| {
            let (_, elapsed) = prev?;
            let delta = now.checked_sub(before?)?;
            (!elapsed.is_zero()).then(|| delta as f64 / elapsed.as_secs_f64())
        };
        let earlier = |map: fn(&ProcSample) -> &BTreeMap<u32, u64>, cpu: u32| {
            prev.and_then(|(p, _)| map(p).get(&cpu).copied())
        };
        self.net_rx
            .iter()
            .map(|(&cpu, &net_rx)| {
                // An offline CPU (no /proc/stat line) spends no time in
                // softirq context: 0 over the interval, if there is one.
                let ticks = self.softirq_ticks.get(&cpu).copied();
                let busy = match ticks {
                    Some(t) => rate(t, earlier(|p| &p.softirq_ticks, cpu)),
                    None => rate(0, Some(0)),
                };
                CpuLoad {
                    cpu,
                    net_rx_per_sec: rate(net_rx, earlier(|p| &p.net_rx, cpu)),
                    softirq_busy: busy.map(|t| (t / hz).clamp(0.0, 1.0)),
                    net_rx_total: net_rx,
                    softirq_seconds_total: ticks.map(|t| t as f64 / hz),
                }
            })
            .collect()
    }
}

/// USER_HZ, the unit of /proc/stat times (sysconf(_SC_CLK_TCK)).
pub fn user_hz() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOFTIRQS: &str = "                    CPU0       CPU1
          HI:          5          0
       TIMER:     801213     769420
      NET_TX:         17         12
      NET_RX:     120000      30500
       BLOCK:       4523       3999
    IRQ_POLL:          0          0
     TASKLET:        210         21
       SCHED:     590000     580000
     HRTIMER:          0          0
         RCU:     300000     310000
";

    const STAT: &str = "cpu  2255 34 2290 22625563 6290 127 456 0 0 0
cpu0 1132 34 1441 11311718 3675 127 438 0 0 0
cpu1 1123 0 849 11313845 2614 0 18 0 0 0
intr 114930548 113199788 3 0 5 263 0 4 [... more]
ctxt 1990473
btime 1062191376
processes 2915
procs_running 1
procs_blocked 0
softirq 183433 0 21755 12 39 1137 231 21459 2263
";

    #[test]
    fn softirqs_net_rx_row() {
        let rx = parse_softirqs(SOFTIRQS).unwrap();
        assert_eq!(rx, BTreeMap::from([(0, 120000), (1, 30500)]));
    }

    #[test]
    fn stat_softirq_column() {
        let ticks = parse_stat_softirq(STAT).unwrap();
        assert_eq!(ticks, BTreeMap::from([(0, 438), (1, 18)]));
    }

    #[test]
    fn malformed_proc_texts_are_errors() {
        assert!(parse_softirqs("").is_err());
        assert!(
            parse_softirqs("   CPU0 CPU1\n  HI: 1 2\n").is_err(),
            "no NET_RX"
        );
        assert!(
            parse_softirqs("   CPU0 CPU1\n  NET_RX: 1\n").is_err(),
            "short row"
        );
        assert!(parse_softirqs("   CPU0 CPUx\n  NET_RX: 1 2\n").is_err());
        assert!(parse_softirqs("   CPU0\n  NET_RX: abc\n").is_err());
        assert!(
            parse_stat_softirq("cpu 1 2 3\nintr 5\n").is_err(),
            "no cpuN"
        );
        assert!(
            parse_stat_softirq("cpu0 1 2 3 4 5 6\n").is_err(),
            "6 columns"
        );
        assert!(parse_stat_softirq("cpu0 1 2 3 4 5 6 x\n").is_err());
    }

    #[test]
    fn rates_between_samples() {
        let prev = ProcSample::parse(SOFTIRQS, STAT).unwrap();
        let mut cur = prev.clone();
        *cur.net_rx.get_mut(&0).unwrap() += 500; // 500 in 0.5 s
        *cur.softirq_ticks.get_mut(&0).unwrap() += 25; // 0.25 s of 0.5 s at 100 Hz
        *cur.net_rx.get_mut(&1).unwrap() -= 10; // went backwards
        let load = cur.rates(Some((&prev, Duration::from_millis(500))), 100);
        assert_eq!(load.len(), 2);
        assert_eq!(load[0].cpu, 0);
        assert!((load[0].net_rx_per_sec.unwrap() - 1000.0).abs() < 1e-9);
        assert!((load[0].softirq_busy.unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(load[0].net_rx_total, 120500);
        assert!((load[0].softirq_seconds_total.unwrap() - 4.63).abs() < 1e-9);
        assert_eq!(load[1].net_rx_per_sec, None, "the counter went backwards");
        assert_eq!(load[1].softirq_busy, Some(0.0));
    }

    #[test]
    fn one_sample_has_totals_but_no_rates() {
        let cur = ProcSample::parse(SOFTIRQS, STAT).unwrap();
        for load in [
            cur.rates(None, 100),
            cur.rates(Some((&cur, Duration::ZERO)), 100),
        ] {
            assert_eq!(load[0].net_rx_total, 120000);
            assert!(load.iter().all(|c| c.net_rx_per_sec.is_none()));
            assert!(load.iter().all(|c| c.softirq_busy.is_none()));
        }
    }

    #[test]
    fn running_kernel_parses() {
        let s = ProcSample::read().unwrap();
        assert!(!s.net_rx.is_empty());
        assert!(!s.softirq_ticks.is_empty());
    }
}

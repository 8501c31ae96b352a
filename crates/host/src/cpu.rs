//! How busy each CPU was between two moments, from the kernel's own
//! accounting in /proc/stat (proc(5)): user, nice, system, irq, softirq and
//! steal time count as busy; idle and iowait do not. Softirq time (where
//! the network receive path runs) is counted wherever it ran, which a
//! thread's own rusage would miss.

use std::time::Duration;

use crate::HostError;

/// Keeps the calling thread on CPU `cpu` (sched_setaffinity(2)), as a
/// benchmark does to put a sender and a receiver on cores of their own.
pub fn pin_current_thread(cpu: usize) -> Result<(), HostError> {
    pin_thread(0, cpu)
}

/// Makes the child of `cmd` run on `cpus` only, from before it executes
/// (its threads and children inherit the mask), as `taskset -c` does.
/// CPUs this host lacks are left out; none left leaves the mask as it is.
pub fn pin_in_child(cmd: &mut std::process::Command, cpus: &[usize]) {
    use std::os::unix::process::CommandExt;
    let mut set = nix::sched::CpuSet::new();
    let mut any = false;
    for &cpu in cpus {
        any |= set.set(cpu).is_ok();
    }
    if !any {
        return;
    }
    // SAFETY: the closure only calls sched_setaffinity (a system call,
    // async-signal-safe) on a mask built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
                .map_err(std::io::Error::from)
        });
    }
}

/// Keeps thread `tid` (0: the calling thread; any task, kernel threads
/// included, as root) on CPU `cpu` (sched_setaffinity(2)).
pub fn pin_thread(tid: i32, cpu: usize) -> Result<(), HostError> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu)
        .and_then(|()| nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(tid), &set))
        .map_err(|e| HostError::io(format!("pin thread {tid} to CPU {cpu}"), e.into()))
}

/// The CPUs the calling thread may run on, in order (its
/// sched_getaffinity(2) mask); `None` if the mask cannot be read.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    Some(
        (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
    )
}

/// The highest-numbered CPU the calling thread may run on
/// ([`allowed_cpus`]); `None` if the mask cannot be read.
pub fn last_allowed_cpu() -> Option<usize> {
    allowed_cpus()?.last().copied()
}

/// CPU time the calling thread has used (clock_gettime(2),
/// CLOCK_THREAD_CPUTIME_ID): what a benchmark on a shared machine measures,
/// since wall time also counts the time spent waiting for a core.
pub fn thread_cpu_time() -> Result<Duration, HostError> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec the call writes into.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Err(HostError::io(
            "clock_gettime(CLOCK_THREAD_CPUTIME_ID)",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// CPU time process `pid` has used, all its threads together
/// (clock_getcpuclockid(3)): what an idle daemon costs, to the
/// nanosecond, however loaded the machine.
pub fn process_cpu_time(pid: u32) -> Result<Duration, HostError> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid clockid_t the call writes into.
    let rc = unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) };
    if rc != 0 {
        return Err(HostError::io(
            format!("clock_getcpuclockid({pid})"),
            std::io::Error::from_raw_os_error(rc),
        ));
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec the call writes into.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(HostError::io(
            format!("clock_gettime(CPU clock of {pid})"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// Per-CPU jiffies at one moment: (busy, total).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuTimes(Vec<(u64, u64)>);

impl CpuTimes {
    pub fn read() -> Result<Self, HostError> {
        let text = std::fs::read_to_string("/proc/stat")
            .map_err(|e| HostError::io("read /proc/stat", e))?;
        Self::parse(&text).map_err(|detail| {
            HostError::io(
                "parse /proc/stat",
                std::io::Error::new(std::io::ErrorKind::InvalidData, detail),
            )
        })
    }

    /// `cpuN user nice system idle iowait irq softirq steal ...`: busy is
    /// all but idle and iowait. A line without those eight numbers is an
    /// error.
    pub fn parse(text: &str) -> Result<Self, String> {
        let cpus: Vec<(u64, u64)> = text
            .lines()
            .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
            .map(|l| {
                let v: Vec<u64> = l
                    .split_whitespace()
                    .skip(1)
                    .take(8)
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("'{l}': {e}"))?;
                if v.len() < 8 {
                    return Err(format!("'{l}': fewer than 8 counters"));
                }
                let total: u64 = v.iter().sum();
                Ok((total - v[3] - v[4], total))
            })
            .collect::<Result<_, _>>()?;
        if cpus.is_empty() {
            return Err("no cpuN line".into());
        }
        Ok(CpuTimes(cpus))
    }

    /// Busy seconds of each CPU since `before` (the counters are in
    /// USER_HZ ticks, sysconf(_SC_CLK_TCK)); `None` for a CPU whose
    /// counters did not advance.
    pub fn busy_seconds_since(&self, before: &CpuTimes) -> Vec<Option<f64>> {
        // SAFETY: sysconf has no memory effects.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let hz = if hz > 0 { hz as f64 } else { 100.0 };
        self.0
            .iter()
            .zip(&before.0)
            .map(|(&(b1, t1), &(b0, t0))| (t1 > t0).then(|| b1.saturating_sub(b0) as f64 / hz))
            .collect()
    }

    /// Busy share of each CPU since `before`; `None` for a CPU whose
    /// counters did not advance.
    pub fn busy_since(&self, before: &CpuTimes) -> Vec<Option<f64>> {
        self.0
            .iter()
            .zip(&before.0)
            .map(|(&(b1, t1), &(b0, t0))| {
                let total = t1.saturating_sub(t0);
                (total > 0).then(|| b1.saturating_sub(b0) as f64 / total as f64)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_excludes_idle_and_iowait() {
        let text = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 4 1 5 40 10 0 0 0 0 0\ncpu1 1 0 1 8 0 0 0 0\nintr 5\n";
        assert_eq!(CpuTimes::parse(text).unwrap().0, vec![(10, 60), (2, 10)]);
        let before = CpuTimes(vec![(10, 60), (2, 10), (5, 5)]);
        let after = CpuTimes(vec![(40, 120), (2, 20), (5, 5)]);
        assert_eq!(after.busy_since(&before), vec![Some(0.5), Some(0.0), None]);
    }

    #[test]
    fn a_thread_s_cpu_time_grows_with_its_work_only() {
        std::thread::spawn(|| {
            let before = thread_cpu_time().unwrap();
            let mut x = 0u64;
            while thread_cpu_time().unwrap() == before {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            let busy = thread_cpu_time().unwrap();
            assert!(busy > before);
            // Sleeping uses no CPU time: far less than the 50 ms slept.
            std::thread::sleep(Duration::from_millis(50));
            assert!(thread_cpu_time().unwrap() - busy < Duration::from_millis(25));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_pins_to_cpu_0_and_not_to_a_cpu_that_is_not_there() {
        std::thread::spawn(|| {
            pin_current_thread(0).unwrap();
            assert!(pin_current_thread(100_000).is_err());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_last_allowed_cpu_follows_the_mask() {
        std::thread::spawn(|| {
            assert!(last_allowed_cpu().is_some());
            pin_current_thread(0).unwrap();
            assert_eq!(last_allowed_cpu(), Some(0));
            assert_eq!(allowed_cpus(), Some(vec![0]));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn another_thread_is_pinned_by_its_id() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw()).unwrap();
            done_rx.recv().unwrap();
            nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap()
        });
        let tid = rx.recv().unwrap();
        pin_thread(tid, 0).unwrap();
        done_tx.send(()).unwrap();
        let set = t.join().unwrap();
        assert!(set.is_set(0).unwrap());
        assert!((1..nix::sched::CpuSet::count()).all(|c| !set.is_set(c).unwrap()));
        assert!(pin_thread(tid, 100_000).is_err());
    }

    #[test]
    fn broken_text_is_an_error() {
        assert!(CpuTimes::parse("intr 5\n").is_err());
        assert!(CpuTimes::parse("cpu0 1 2 3\n").is_err());
        assert!(CpuTimes::parse("cpu0 1 2 x 4 5 6 7 8\n").is_err());
    }

    /// A busy child's CPU time grows past what it spun; a process that
    /// does not exist is an error naming it, not zero.
    #[test]
    fn another_process_cpu_time_counts_its_work() {
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut used = Duration::ZERO;
        while used < Duration::from_millis(50) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            used = process_cpu_time(pid).unwrap();
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(used >= Duration::from_millis(50), "{used:?}");
        // The child is reaped: its pid names no process now.
        let err = process_cpu_time(pid).unwrap_err();
        assert!(err.to_string().contains(&pid.to_string()), "{err}");
    }
}

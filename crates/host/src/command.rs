//! Running a tool (`ip`, `ethtool`, ...) to completion: its stdout is the
//! result, and when it fails the error names the program, its arguments,
//! its exit status and what it wrote on stderr. And running a user's
//! program the way system(3) does, handing back its exit status.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::HostError;

/// `cmd` as a person would type it: the program and its arguments.
pub fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `cmd` (stdin empty) and returns its stdout; a program that cannot
/// be started or exits non-zero is an error carrying its stderr.
pub fn run(cmd: &mut Command) -> Result<String, HostError> {
    let command = describe(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => HostError::NoProgram {
                command: command.clone(),
                source,
            },
            _ => HostError::io(format!("run {command}"), source),
        })?;
    if !out.status.success() {
        return Err(HostError::Failed {
            command,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Where `program` is: itself when it names a path (has a `/`), else the
/// first executable file of that name in a directory of `$PATH`, as the
/// shell looks it up.
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return is_executable(Path::new(program)).then(|| program.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `ip ARGS...` (iproute2), run with [`run`].
pub fn ip(args: &[&str]) -> Result<String, HostError> {
    run(Command::new("ip").args(args))
}

/// The child `wait_like_system` waits for (0: none): where a SIGTERM or
/// SIGHUP to this process is passed on.
static WAITED_CHILD: AtomicI32 = AtomicI32::new(0);

/// A SIGTERM or SIGHUP that came before the child's pid was known.
static PENDING_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Passes SIGTERM or SIGHUP on to the waited-for child, which ends; the
/// caller then returns from its wait and cleans up.
extern "C" fn pass_on(sig: libc::c_int) {
    let pid = WAITED_CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill() is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    } else {
        PENDING_SIGNAL.store(sig, Ordering::SeqCst);
    }
}

/// Runs `cmd` and waits for it. Meanwhile this process ignores SIGINT and
/// SIGQUIT (the terminal's ^C goes to the child, and the caller survives to
/// clean up) and passes SIGTERM and SIGHUP on to the child (a service
/// manager's stop reaches the program, and the caller again survives to
/// clean up); the child starts with the default handlers. The child also
/// dies with this process (PR_SET_PDEATHSIG), so a caller killed outright
/// leaves no orphan behind.
pub fn wait_like_system(cmd: &mut Command) -> io::Result<ExitStatus> {
    // SAFETY: getpid() has no memory effects.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the pre_exec closure only calls signal(), sigprocmask(),
    // prctl() and getppid(), which are async-signal-safe (the mask is reset
    // as a shell resets it for the program it starts).
    unsafe {
        cmd.pre_exec(move || {
            for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died before the line above took effect.
            if libc::getppid() != parent {
                return Err(io::Error::other("the parent process is gone"));
            }
            Ok(())
        });
    }
    // SAFETY: installing SIG_IGN has no memory effects; restored below.
    let (old_int, old_quit) = unsafe {
        (
            libc::signal(libc::SIGINT, libc::SIG_IGN),
            libc::signal(libc::SIGQUIT, libc::SIG_IGN),
        )
    };
    PENDING_SIGNAL.store(0, Ordering::SeqCst);
    // SAFETY: installs a handler that only calls kill(); restored below.
    let (old_term, old_hup) = unsafe {
        let handler = pass_on as extern "C" fn(libc::c_int) as libc::sighandler_t;
        (
            libc::signal(libc::SIGTERM, handler),
            libc::signal(libc::SIGHUP, handler),
        )
    };
    let child = cmd.spawn();
    if let Ok(c) = &child {
        let pid = c.id() as i32;
        WAITED_CHILD.store(pid, Ordering::SeqCst);
        // A signal that came while the child was being started.
        let early = PENDING_SIGNAL.swap(0, Ordering::SeqCst);
        if early != 0 {
            // SAFETY: signals our own child.
            unsafe { libc::kill(pid, early) };
        }
    }
    let status = child.and_then(|mut c| c.wait());
    WAITED_CHILD.store(0, Ordering::SeqCst);
    // SAFETY: restores the handlers saved above.
    unsafe {
        libc::signal(libc::SIGINT, old_int);
        libc::signal(libc::SIGQUIT, old_quit);
        libc::signal(libc::SIGTERM, old_term);
        libc::signal(libc::SIGHUP, old_hup);
    }
    status
}

/// The shell's view of an exit status: the code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// The children of process `pid` now, in pid order (none once it is
/// gone). The kernel lists children per thread, under the thread that
/// started them (proc(5), `/proc/PID/task/TID/children`), so every
/// thread's list is read; a thread that ended meanwhile has none.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut all: Vec<u32> = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    all.sort_unstable();
    all
}

/// A server program running in the background, ended when dropped as a
/// service manager ends one: SIGTERM, and after `grace` SIGKILL to it and
/// its children (a master's workers), so nothing outlives its owner.
pub struct Daemon {
    child: std::process::Child,
    grace: std::time::Duration,
}

impl Daemon {
    /// Starts `cmd` (stdin empty). Its stdout and stderr are what `cmd`
    /// says (inherited unless set).
    pub fn spawn(cmd: &mut Command) -> Result<Daemon, HostError> {
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| HostError::io(format!("start {}", describe(cmd)), e))?;
        Ok(Daemon {
            child,
            grace: std::time::Duration::from_secs(5),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited, and how.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Ends it (SIGTERM, then SIGKILL to it and its children after the
    /// grace period); how it exited.
    pub fn stop(mut self) -> Option<ExitStatus> {
        self.terminate()
    }

    fn terminate(&mut self) -> Option<ExitStatus> {
        if let Some(status) = self.exited() {
            return Some(status);
        }
        signal(self.pid(), libc::SIGTERM);
        let deadline = std::time::Instant::now() + self.grace;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for pid in children(self.pid()) {
            signal(pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Sends `sig` to process `pid`; one already gone is not an error here.
fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) has no memory effects; a pid that is gone is ESRCH.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_and_its_children_end_when_it_is_stopped_or_dropped() {
        // A shell that ignores SIGTERM and has a child: after the grace
        // period both are killed.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "trap '' TERM; sleep 30 & wait"]);
        let mut d = Daemon::spawn(&mut cmd).unwrap();
        d.grace = std::time::Duration::from_millis(200);
        let pid = d.pid();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while children(pid).is_empty() {
            assert!(std::time::Instant::now() < deadline, "sh started no child");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let child = children(pid)[0];
        let status = d.stop().expect("it was waited for");
        assert!(!status.success());
        assert!(children(pid).is_empty());
        // The killed child ends (SIGKILL is delivered when it next runs;
        // it may stay a zombie of init's for a moment).
        let ended = || match std::fs::read_to_string(format!("/proc/{child}/stat")) {
            Ok(state) => state.contains(") Z"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => panic!("cannot read /proc/{child}/stat: {e}"),
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !ended() {
            assert!(
                std::time::Instant::now() < deadline,
                "child {child} outlived the kill"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Dropped without stop: ended too.
        let d = Daemon::spawn(Command::new("sleep").arg("30")).unwrap();
        let pid = d.pid();
        drop(d);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }

    #[test]
    fn programs_are_found_on_the_path_or_by_their_path() {
        let sh = find_program("sh").expect("sh on PATH");
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
        assert_eq!(find_program(sh.to_str().unwrap()), Some(sh.clone()));
        assert_eq!(find_program("steer-no-such-program"), None);
        assert_eq!(find_program("/nonexistent/sh"), None);
        // A file that is not executable is not a program.
        assert_eq!(find_program("/etc/passwd"), None);
    }

    #[test]
    fn stdout_is_the_result() {
        let out = run(Command::new("sh").args(["-c", "echo hello; echo ignored >&2"])).unwrap();
        assert_eq!(out, "hello\n");
    }

    #[test]
    fn a_failure_carries_program_arguments_status_and_stderr() {
        let e =
            run(Command::new("sh").args(["-c", "echo 'no such device' >&2; exit 3"])).unwrap_err();
        match &e {
            HostError::Failed {
                command,
                status,
                stderr,
            } => {
                assert_eq!(command, "sh -c echo 'no such device' >&2; exit 3");
                assert_eq!(status.code(), Some(3));
                assert_eq!(stderr, "no such device");
            }
            other => panic!("not Failed: {other}"),
        }
        let text = e.to_string();
        assert!(
            text.contains("sh -c") && text.contains("no such device"),
            "{text}"
        );
        assert!(!e.is_environment() && !e.is_bad_input());
    }

    #[test]
    fn a_missing_program_is_about_the_environment() {
        let e = run(Command::new("steer-no-such-program").arg("x")).unwrap_err();
        assert!(matches!(e, HostError::NoProgram { .. }), "{e}");
        assert!(e.is_environment());
        assert!(e.to_string().contains("steer-no-such-program x"), "{e}");
    }

    #[test]
    fn ip_reports_its_own_complaint() {
        let e = ip(&["link", "show", "dev", "steer-nodev0"]).unwrap_err();
        assert!(
            e.to_string().contains("ip link show dev steer-nodev0"),
            "{e}"
        );
        match e {
            HostError::Failed { stderr, .. } => assert!(!stderr.is_empty()),
            HostError::NoProgram { .. } => testkit::missing("the program ip (iproute2)"),
            other => panic!("{other}"),
        }
    }

    /// The test binary itself as a parent that waits for `sleep` the
    /// system(3) way (run by the test below with the variable set).
    #[test]
    fn wait_like_system_as_a_parent() {
        if std::env::var_os("STEER_HOST_TEST_PARENT").is_none() {
            return;
        }
        let status = wait_like_system(Command::new("sleep").arg("300")).unwrap();
        // A SIGTERM to this process ended the child, and this process
        // lived on to say so.
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        println!("child ended by SIGTERM");
    }

    fn is_gone(pid: u32) -> bool {
        // A zombie is gone too: it runs nothing.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z'),
        }
    }

    fn parent_process() -> std::process::Child {
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "command::tests::wait_like_system_as_a_parent"])
            .args(["--nocapture", "--test-threads", "1"])
            .env("STEER_HOST_TEST_PARENT", "1")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }

    #[test]
    fn sigterm_to_the_waiting_parent_ends_the_child_and_the_parent_lives_on() {
        let mut parent = parent_process();
        let child = testkit::child_of(parent.id(), None);
        // SAFETY: signals a process this test started.
        unsafe { libc::kill(parent.id() as i32, libc::SIGTERM) };
        let out = std::io::read_to_string(parent.stdout.take().unwrap()).unwrap();
        assert!(parent.wait().unwrap().success(), "{out}");
        assert!(out.contains("child ended by SIGTERM"), "{out}");
        assert!(is_gone(child));
    }

    #[test]
    fn the_child_dies_with_a_parent_killed_outright() {
        let mut parent = parent_process();
        let child = testkit::child_of(parent.id(), None);
        parent.kill().unwrap();
        parent.wait().unwrap();
        for _ in 0..500 {
            if is_gone(child) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("{child} outlived its parent");
    }
}

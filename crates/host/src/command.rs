//! Running a tool (`ip`, `ethtool`, ...) to completion: its stdout is the
//! result, and when it fails the error names the program, its arguments,
//! its exit status and what it wrote on stderr. And running a user's
//! program the way system(3) does, handing back its exit status.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

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

/// Runs `cmd` and waits for it. Meanwhile this process ignores SIGINT and
/// SIGQUIT (the terminal's ^C goes to the child, and the caller survives to
/// clean up); the child starts with the default handlers.
pub fn wait_like_system(cmd: &mut Command) -> io::Result<ExitStatus> {
    // SAFETY: the pre_exec closure only calls signal(), which is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
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
    let status = cmd.status();
    // SAFETY: restores the handlers saved above.
    unsafe {
        libc::signal(libc::SIGINT, old_int);
        libc::signal(libc::SIGQUIT, old_quit);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

//! Running a child to completion the way system(3) does.

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus};

/// Runs `cmd` and waits for it. Meanwhile this process ignores SIGINT and
/// SIGQUIT (the terminal's ^C goes to the child, and the caller survives to
/// clean up); the child starts with the default handlers.
pub fn wait_like_system(cmd: &mut Command) -> std::io::Result<ExitStatus> {
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

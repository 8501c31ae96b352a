//! The one place that turns errors into exit codes and a one-line message.
//!
//! Exit codes (the same table is in the README and DESIGN.md):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | ok |
//! | 1 | the operation failed: something it needs did not do its part (an agent or the allocator unreachable, too slow or answering nonsense; a device gone mid-way; a command it ran failed), or the thing checked is false (a run that failed its check, a regression) |
//! | 2 | bad usage or bad input: an unknown flag or bad value, a flag the command cannot honour, an input file that is missing or does not parse, a name (device, lab, host, namespace, run) that names nothing |
//! | 3 | missing privilege or kernel feature (or a program the command needs) |
//!
//! `steer exec` and `steer lab exec` exit with their command's status, and
//! `steer bench run` with 130 when interrupted.
//!
//! Every library error type says which it is (`is_environment()`,
//! `is_bad_input()`; neither means the operation failed); [`code_for`]
//! asks the outermost classified error of the chain.

use std::io;

pub const OK: i32 = 0;
/// The operation failed, or the thing checked is false.
pub const FAILED: i32 = 1;
/// Bad usage or bad input.
pub const BAD_INPUT: i32 = 2;
/// Missing privilege or kernel feature.
pub const ENVIRONMENT: i32 = 3;
/// `steer bench run` stopped by SIGINT (128 + 2, the shell's convention).
pub const INTERRUPTED: i32 = 130;

/// An error in how the command was used that clap cannot see (a flag the
/// command cannot honour, a combination of values): exit 2.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// [`OK`] when the run did what it was asked, else [`FAILED`]: for commands
/// whose output is complete either way (a matrix with regressions, an
/// experiment with failed connections).
pub fn ok_unless(failed: bool) -> i32 {
    if failed {
        FAILED
    } else {
        OK
    }
}

/// A [`Usage`] error as an `anyhow::Error`.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Usage(message.into()))
}

/// Prints `steer: <error chain>` on one line, each cause once, and returns
/// the exit code.
pub fn report(err: &anyhow::Error) -> i32 {
    if is_broken_pipe(err) {
        return OK;
    }
    let line = host::error_line(err.chain().map(|e| e.to_string()));
    crate::output::note!("steer: {line}");
    code_for(err)
}

/// The exit code a library error type gives itself: 3 when
/// `is_environment()`, 2 when `is_bad_input()`, else 1.
macro_rules! classified {
    ($cause:expr, $($ty:ty),+ $(,)?) => {
        None $(.or_else(|| {
            $cause.downcast_ref::<$ty>().map(|e| {
                if e.is_environment() {
                    ENVIRONMENT
                } else if e.is_bad_input() {
                    BAD_INPUT
                } else {
                    FAILED
                }
            })
        }))+
    };
}

/// The code of one error of a chain, when its type says what it is.
fn class_of(cause: &(dyn std::error::Error + 'static)) -> Option<i32> {
    if cause.is::<Usage>() {
        return Some(BAD_INPUT);
    }
    if let Some(code) = classified!(
        cause,
        rss::RssError,
        rss::live::LiveError,
        host::HostError,
        nic::NicError,
        lab::LabError,
        srap::SrapError,
        srap::alloc::AllocError,
        srap::alloc::ClientError,
        agent::AgentError,
        agent::ClientError,
        agent::ReceiverError,
        agent::TokenError,
        agent::load::ProcError,
        agent::allocator::AllocatorError,
        binder::BinderError,
        order::CaptureError,
        order::sorter::ConfigError,
        // pktio::PktIoError reaches the binary only inside WireError::PktIo
        // and LabError::PktIo, which classify it (is_environment and
        // is_bad_input delegate).
        wire::WireError,
        wire::impair::SpecError,
        lb::TraceError,
        lb::ReportError,
        lb::SimError,
        lbxdp::LbXdpError,
        toe::ToeError,
        toe::app::RunError,
        order::report::SortError,
        exp::ExpError,
        bench::BenchError,
    ) {
        return Some(code);
    }
    if let Some(e) = cause.downcast_ref::<io::Error>() {
        return Some(io_class(e.kind()));
    }
    if let Some(e) = cause.downcast_ref::<serde_json::Error>() {
        return Some(e.io_error_kind().map_or(BAD_INPUT, io_class));
    }
    None
}

/// A bare I/O error, as the binary meets it reading the files and running
/// the programs the user named: one that does not exist or does not parse
/// is bad input, a refusal is privilege, anything else a failure.
fn io_class(kind: io::ErrorKind) -> i32 {
    match kind {
        io::ErrorKind::PermissionDenied | io::ErrorKind::Unsupported => ENVIRONMENT,
        io::ErrorKind::NotFound
        | io::ErrorKind::InvalidInput
        | io::ErrorKind::InvalidData
        | io::ErrorKind::IsADirectory
        | io::ErrorKind::NotADirectory => BAD_INPUT,
        _ => FAILED,
    }
}

/// The code of the outermost error in the chain whose type says what it is
/// (a library error delegates to what it wraps where that decides). A chain
/// of messages only is the binary's own check of its arguments: 2.
fn code_for(err: &anyhow::Error) -> i32 {
    err.chain().find_map(class_of).unwrap_or(BAD_INPUT)
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        let io_kind = c
            .downcast_ref::<io::Error>()
            .map(io::Error::kind)
            .or_else(|| {
                c.downcast_ref::<serde_json::Error>()
                    .and_then(|e| e.io_error_kind())
            });
        io_kind == Some(io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classified_errors_decide_outermost_first() {
        let unreachable = agent::ClientError::Unreachable {
            url: "http://127.0.0.1:1".into(),
            source: io::Error::from(io::ErrorKind::ConnectionRefused),
        };
        let err = anyhow::Error::new(unreachable).context("cannot get the config");
        assert_eq!(code_for(&err), FAILED);
        let err = anyhow::Error::new(rss::RssError::KeyEmpty).context("--key");
        assert_eq!(code_for(&err), BAD_INPUT);
        let privilege = nic::NicError::Privilege {
            what: "attach".into(),
        };
        let err = anyhow::Error::new(lab::LabError::Nic(privilege));
        assert_eq!(code_for(&err), ENVIRONMENT);
        let gone = lab::LabError::NoSuchLab {
            name: "x".into(),
            path: "/run/x".into(),
        };
        assert_eq!(code_for(&anyhow::Error::new(gone)), BAD_INPUT);
        let err = anyhow::Error::new(srap::SrapError::BadPortRange("x".into()));
        assert_eq!(code_for(&err), BAD_INPUT);
        assert_eq!(code_for(&usage("no --json here")), BAD_INPUT);
        assert_eq!(code_for(&anyhow::anyhow!("give SRC and DST")), BAD_INPUT);
    }

    /// What a wrapper wraps decides (each library tests its own classes).
    #[test]
    fn a_wrapped_library_error_decides() {
        let code = |e: anyhow::Error| code_for(&e);
        let bad_url = agent::ClientError::InvalidUrl {
            url: "ftp://x".into(),
            reason: "only http://".into(),
        };
        assert_eq!(code(agent::ReceiverError::Agent(bad_url).into()), BAD_INPUT);
        let missing = host::HostError::NoSuchNetns { name: "x".into() };
        assert_eq!(code(rss::live::LiveError::from(missing).into()), BAD_INPUT);
        let garbled = rss::live::LiveError::Decode {
            what: "RSS_GET".into(),
            reason: "short".into(),
        };
        assert_eq!(code(garbled.into()), FAILED);
        let timed_out = toe::app::RunError::Service(toe::ToeError::TimedOut);
        assert_eq!(code(timed_out.into()), FAILED);
        let config = toe::ToeError::Config("--pipeline-threads 0".into());
        assert_eq!(code(config.into()), BAD_INPUT);
        let missing = toe::app::RunError::Spawn {
            program: "nosuch".into(),
            source: io::Error::from(io::ErrorKind::NotFound),
        };
        assert_eq!(code(missing.into()), BAD_INPUT);
    }

    #[test]
    fn bare_io_errors() {
        let code = |kind| code_for(&anyhow::Error::new(io::Error::from(kind)).context("file"));
        assert_eq!(code(io::ErrorKind::NotFound), BAD_INPUT);
        assert_eq!(code(io::ErrorKind::PermissionDenied), ENVIRONMENT);
        assert_eq!(code(io::ErrorKind::ConnectionReset), FAILED);
    }
}

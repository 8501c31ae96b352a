//! The one place that turns errors into exit codes and a one-line message.

use std::io;

pub const OK: i32 = 0;
pub const BAD_INPUT: i32 = 2;
pub const ENVIRONMENT: i32 = 3;

/// Prints `steer: <error chain>` on one line and returns the exit code.
pub fn report(err: &anyhow::Error) -> i32 {
    if is_broken_pipe(err) {
        return OK;
    }
    let chain: Vec<String> = err.chain().map(|e| e.to_string()).collect();
    let mut line = chain.join(": ");
    if line.contains('\n') {
        line = line.replace('\n', " ");
    }
    eprintln!("steer: {line}");
    code_for(err)
}

/// Whether `cause` is one of the library error types named, and says it is
/// about the environment (`is_environment()`: privilege, a kernel feature,
/// a missing device).
macro_rules! environment_error {
    ($cause:expr, $($ty:ty),+ $(,)?) => {
        false $(|| $cause.downcast_ref::<$ty>().is_some_and(|e| e.is_environment()))+
    };
}

/// 3 when any error in the chain is about privilege or a kernel feature.
fn code_for(err: &anyhow::Error) -> i32 {
    let environment = err.chain().any(|cause| {
        environment_error!(
            cause,
            rss::live::LiveError,
            nic::NicError,
            lab::LabError,
            exp::ExpError,
            binder::BinderError,
            wire::WireError,
            lbxdp::LbXdpError,
            agent::AgentError,
        ) || cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::PermissionDenied)
    });
    if environment {
        ENVIRONMENT
    } else {
        BAD_INPUT
    }
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

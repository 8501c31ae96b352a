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

/// 3 when any error in the chain is about privilege or a kernel feature.
fn code_for(err: &anyhow::Error) -> i32 {
    for cause in err.chain() {
        let environment = if let Some(e) = cause.downcast_ref::<rss::live::LiveError>() {
            e.is_environment()
        } else if let Some(e) = cause.downcast_ref::<nic::NicError>() {
            e.is_environment()
        } else if let Some(e) = cause.downcast_ref::<lab::LabError>() {
            e.is_environment()
        } else if let Some(e) = cause.downcast_ref::<exp::ExpError>() {
            e.is_environment()
        } else if let Some(e) = cause.downcast_ref::<binder::BinderError>() {
            e.is_environment()
        } else if let Some(e) = cause.downcast_ref::<wire::WireError>() {
            e.is_environment()
        } else if let Some(e) = cause.downcast_ref::<lbxdp::LbXdpError>() {
            e.is_environment()
        } else if let Some(e) = cause.downcast_ref::<agent::AgentError>() {
            e.is_environment()
        } else if let Some(e) = cause.downcast_ref::<io::Error>() {
            e.kind() == io::ErrorKind::PermissionDenied
        } else {
            false
        };
        if environment {
            return ENVIRONMENT;
        }
    }
    BAD_INPUT
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

//! Running iperf3 between lab hosts and reading its JSON report.

use std::io::ErrorKind;
use std::net::IpAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde::Deserialize;

use crate::ExpError;

/// What one iperf3 client run reports that Steer uses.
#[derive(Debug, Clone)]
pub struct IperfRun {
    /// Source ports the kernel chose for the data streams (not the control
    /// connection), as iperf3's `start.connected[].local_port` reports them.
    pub source_ports: Vec<u16>,
    /// Receiver-side goodput, bits per second (`end.sum_received`).
    pub bits_per_second: f64,
    /// Receiver-side goodput of each data stream, same order as
    /// `source_ports` (`end.streams[].receiver`, matched by socket).
    pub stream_bits_per_second: Vec<f64>,
    /// Segments the sender retransmitted (`end.sum_sent.retransmits`; TCP
    /// only, so `None` when iperf3 did not report it).
    pub retransmits: Option<u64>,
}

#[derive(Deserialize)]
struct Report {
    start: Start,
    end: End,
}

/// iperf3 reports failures inside its JSON (`"error": "..."`), sometimes
/// with exit status 0.
#[derive(Deserialize)]
struct ErrorReport {
    error: Option<String>,
}

#[derive(Deserialize)]
struct Start {
    connected: Vec<Connected>,
}

#[derive(Deserialize)]
struct Connected {
    socket: i64,
    local_port: u16,
}

#[derive(Deserialize)]
struct End {
    sum_received: Sum,
    #[serde(default)]
    sum_sent: Option<SentSum>,
    #[serde(default)]
    streams: Vec<Stream>,
}

#[derive(Deserialize)]
struct Stream {
    receiver: StreamSum,
}

#[derive(Deserialize)]
struct StreamSum {
    socket: i64,
    bits_per_second: f64,
}

#[derive(Deserialize)]
struct Sum {
    bits_per_second: f64,
}

#[derive(Deserialize)]
struct SentSum {
    #[serde(default)]
    retransmits: Option<u64>,
}

/// Parses `iperf3 --json` client output.
pub fn parse_report(text: &str) -> Result<IperfRun, ExpError> {
    if let Ok(ErrorReport { error: Some(error) }) = serde_json::from_str(text) {
        return Err(ExpError::Program {
            program: "iperf3".into(),
            detail: error,
        });
    }
    let report: Report =
        serde_json::from_str(text).map_err(|e| ExpError::IperfOutput(e.to_string()))?;
    // A stream without a receiver entry was not measured: an error, not a
    // stream that carried nothing.
    let stream_rate = |c: &Connected| {
        report
            .end
            .streams
            .iter()
            .find(|s| s.receiver.socket == c.socket)
            .map(|s| s.receiver.bits_per_second)
            .ok_or_else(|| {
                ExpError::IperfOutput(format!(
                    "no receiver result for the stream on socket {} (source port {})",
                    c.socket, c.local_port
                ))
            })
    };
    let connected = &report.start.connected;
    if connected.is_empty() {
        return Err(ExpError::IperfOutput("no data stream connected".into()));
    }
    Ok(IperfRun {
        source_ports: connected.iter().map(|c| c.local_port).collect(),
        bits_per_second: report.end.sum_received.bits_per_second,
        stream_bits_per_second: connected
            .iter()
            .map(stream_rate)
            .collect::<Result<_, _>>()?,
        retransmits: report.end.sum_sent.and_then(|s| s.retransmits),
    })
}

/// An iperf3 server for one test (`--one-off`), killed when dropped.
pub struct Server(Child);

impl Server {
    pub fn start(mut cmd: Command, bind: IpAddr, port: u16) -> Result<Server, ExpError> {
        cmd.args([
            "-s",
            "--one-off",
            "-B",
            &bind.to_string(),
            "-p",
            &port.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let child = cmd.spawn().map_err(spawn_error)?;
        Ok(Server(child))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_error(e: std::io::Error) -> ExpError {
    if e.kind() == ErrorKind::NotFound {
        ExpError::MissingProgram {
            program: "iperf3".into(),
        }
    } else {
        ExpError::Program {
            program: "iperf3".into(),
            detail: e.to_string(),
        }
    }
}

/// Runs `iperf3 -c` with `make_cmd()` (a fresh command in the sender's
/// namespace each try), retrying while the server is still starting.
pub fn run_client(
    make_cmd: impl Fn() -> Result<Command, ExpError>,
    server: IpAddr,
    port: u16,
    streams: u32,
    seconds: u32,
) -> Result<IperfRun, ExpError> {
    let mut last = String::new();
    for _ in 0..50 {
        let output = make_cmd()?
            .args(["-c", &server.to_string(), "-p", &port.to_string()])
            .args([
                "-P",
                &streams.to_string(),
                "-t",
                &seconds.to_string(),
                "--json",
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(spawn_error)?;
        let text = String::from_utf8_lossy(&output.stdout);
        match parse_report(&text) {
            Ok(run) if output.status.success() => return Ok(run),
            // The server may not listen yet.
            Err(ExpError::Program { detail, .. }) if detail.contains("refused") => last = detail,
            Err(e) => return Err(e),
            Ok(_) => last = format!("exit status {}", output.status),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(ExpError::Program {
        program: "iperf3 -c".into(),
        detail: last,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ports_and_goodput() {
        let text = r#"{"start":{"connected":[{"socket":5,"local_host":"10.0.0.1","local_port":40000,
            "remote_host":"10.0.0.2","remote_port":5201},{"socket":7,"local_port":40002}],"extra":1},
            "end":{"sum_received":{"bits_per_second":1.5e9},"sum_sent":{},
            "streams":[{"sender":{},"receiver":{"socket":7,"bits_per_second":1e9}},
                       {"sender":{},"receiver":{"socket":5,"bits_per_second":0.5e9}}]}}"#;
        let run = parse_report(text).unwrap();
        assert_eq!(run.source_ports, vec![40000, 40002]);
        assert_eq!(run.bits_per_second, 1.5e9);
        assert_eq!(run.stream_bits_per_second, vec![0.5e9, 1e9]);
        assert_eq!(run.retransmits, None);
        let with_sent = text.replace(r#""sum_sent":{}"#, r#""sum_sent":{"retransmits":3}"#);
        assert_eq!(parse_report(&with_sent).unwrap().retransmits, Some(3));
    }

    #[test]
    fn error_field_is_an_error_even_with_exit_0() {
        let text = r#"{"start":{"connected":[]},"intervals":[],"end":{},
            "error":"unable to connect to server: Connection refused"}"#;
        match parse_report(text) {
            Err(ExpError::Program { detail, .. }) => assert!(detail.contains("refused")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_stream_without_a_receiver_result_is_an_error() {
        let text = r#"{"start":{"connected":[{"socket":5,"local_port":40000},{"socket":7,"local_port":40002}]},
            "end":{"sum_received":{"bits_per_second":1e9},
            "streams":[{"sender":{},"receiver":{"socket":5,"bits_per_second":1e9}}]}}"#;
        match parse_report(text) {
            Err(ExpError::IperfOutput(why)) => assert!(why.contains("40002"), "{why}"),
            other => panic!("expected an error, got {other:?}"),
        }
        // No streams list at all: every stream lacks its result.
        let text = r#"{"start":{"connected":[{"socket":5,"local_port":40000}]},
            "end":{"sum_received":{"bits_per_second":1e9}}}"#;
        assert!(matches!(parse_report(text), Err(ExpError::IperfOutput(_))));
        // No stream connected: nothing was measured.
        let text = r#"{"start":{"connected":[]},"end":{"sum_received":{"bits_per_second":0}}}"#;
        assert!(matches!(parse_report(text), Err(ExpError::IperfOutput(_))));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(matches!(
            parse_report("error - unable to connect"),
            Err(ExpError::IperfOutput(_))
        ));
        assert!(matches!(parse_report("{}"), Err(ExpError::IperfOutput(_))));
    }
}

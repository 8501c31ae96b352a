//! nginx's side of the apps experiment: load from wrk, read back through
//! a script that prints wrk's summary as one JSON line, and a content
//! check that fetches each served file over one keep-alive HTTP/1.1
//! connection and compares it byte for byte.

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::Deserialize;

use super::client::{
    connect_when_listening, first_difference, ClientRun, Verification, CONNECT_PATIENCE,
};
use crate::{refuse_if, ExpError};

/// What starts the script's line among wrk's own report (also on stdout).
const WRK_MARK: &str = "steer-wrk: ";

/// A wrk script whose `done` prints the summary as one JSON line after
/// [`WRK_MARK`]. An empty latency histogram (no response timed) has its
/// min above its max, and `percentile` would say 0 there: such a run
/// prints null, so 0 is never read as a latency.
pub const WRK_SCRIPT: &str = r#"
done = function(summary, latency, requests)
  local function percentile(p)
    if latency.min > latency.max then return "null" end
    return string.format("%.1f", latency:percentile(p))
  end
  local e = summary.errors
  io.write(string.format(
    'steer-wrk: {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"p50_us":%s,"p99_us":%s,"p999_us":%s}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    percentile(50), percentile(99), percentile(99.9)))
end
"#;

/// The script's line, as far as [`ClientRun`] needs it.
#[derive(Deserialize)]
struct WrkSummary {
    requests: u64,
    duration_us: u64,
    errors: WrkErrors,
    #[serde(default)]
    p50_us: Option<f64>,
    #[serde(default)]
    p99_us: Option<f64>,
    #[serde(default)]
    p999_us: Option<f64>,
}

/// wrk's error counters. `status` counts replies with a status of 400 or
/// more (wrk's rule), so a 3xx is not an error here.
#[derive(Deserialize)]
struct WrkErrors {
    connect: u64,
    read: u64,
    write: u64,
    status: u64,
    timeout: u64,
}

fn wrk_error(detail: impl Into<String>) -> ExpError {
    ExpError::Program {
        program: "wrk".into(),
        detail: detail.into(),
    }
}

/// Reads the line [`WRK_SCRIPT`] printed from wrk's stdout.
pub fn parse_wrk(stdout: &str) -> Result<ClientRun, ExpError> {
    let mut lines = stdout.lines().filter_map(|l| l.strip_prefix(WRK_MARK));
    let line = lines
        .next()
        .ok_or_else(|| wrk_error(format!("no '{WRK_MARK}' line in its output")))?;
    if lines.next().is_some() {
        return Err(wrk_error(format!("more than one '{WRK_MARK}' line")));
    }
    let summary: WrkSummary = serde_json::from_str(line)
        .map_err(|e| wrk_error(format!("its summary line {line:?}: {e}")))?;
    let e = &summary.errors;
    let errors = [e.connect, e.read, e.write, e.status, e.timeout]
        .into_iter()
        .try_fold(0u64, u64::checked_add)
        .ok_or_else(|| wrk_error("its error counts overflow 64 bits"))?;
    for (name, p) in [
        ("p50_us", summary.p50_us),
        ("p99_us", summary.p99_us),
        ("p999_us", summary.p999_us),
    ] {
        if p.is_some_and(|p| p < 0.0) {
            return Err(wrk_error(format!("a negative latency {name} in {line:?}")));
        }
    }
    Ok(ClientRun {
        requests: summary.requests,
        seconds: summary.duration_us as f64 / 1e6,
        errors,
        p50_us: summary.p50_us,
        p99_us: summary.p99_us,
        p999_us: summary.p999_us,
    })
}

/// The script written to a file of its own, removed on drop.
struct ScriptFile(PathBuf);

impl ScriptFile {
    fn write() -> Result<ScriptFile, ExpError> {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("steer-wrk-{}-{n}.lua", std::process::id()));
        std::fs::write(&path, WRK_SCRIPT)
            .map_err(|e| wrk_error(format!("write its script {}: {e}", path.display())))?;
        Ok(ScriptFile(path))
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs wrk against `url` for `seconds` (rounded up to whole seconds, at
/// least 1, as wrk's -d takes them) from namespace `netns` (None: this
/// one), on `cpus` (empty: anywhere).
pub(crate) fn wrk(
    netns: Option<&str>,
    url: &str,
    threads: u32,
    connections: u32,
    seconds: f64,
    cpus: &[usize],
) -> Result<ClientRun, ExpError> {
    refuse_if(threads == 0, "wrk needs at least one thread")?;
    refuse_if(connections < threads, "wrk needs a connection per thread")?;
    refuse_if(
        !(seconds.is_finite() && seconds >= 0.0),
        "wrk's duration must be a number of seconds",
    )?;
    let whole_seconds = (seconds.ceil() as u64).max(1);
    let script = ScriptFile::write()?;
    let mut cmd = Command::new("wrk");
    cmd.args(["-t", &threads.to_string(), "-c", &connections.to_string()])
        .args(["-d", &format!("{whole_seconds}s"), "--timeout", "5s", "-s"])
        .arg(&script.0)
        .arg(url)
        .stdin(Stdio::null());
    if let Some(name) = netns {
        host::netns::enter_in_child(&mut cmd, name).map_err(lab::LabError::from)?;
    }
    host::cpu::pin_in_child(&mut cmd, cpus);
    let output = cmd.output().map_err(|e| match e.kind() {
        ErrorKind::NotFound => ExpError::MissingProgram {
            program: "wrk".into(),
        },
        _ => wrk_error(e.to_string()),
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(wrk_error(format!("{}: {}", output.status, stderr.trim())));
    }
    parse_wrk(&String::from_utf8_lossy(&output.stdout))
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Longer status or header lines, or more header lines, are no reply
/// from the servers checked here.
const MAX_LINE: u64 = 8192;
const MAX_FIELDS: usize = 100;

/// Fetches each of `files` (path, the bytes the server was given)
/// `rounds` times from `addr`, from namespace `netns`, over one
/// keep-alive connection, and compares each reply with the file. Only
/// failing to connect at all is an error; every other failure is a wrong
/// item in the result.
pub(crate) fn verify_files(
    netns: Option<&str>,
    addr: SocketAddr,
    files: &[(&str, &[u8])],
    rounds: u32,
) -> Result<Verification, ExpError> {
    for (path, _) in files {
        let plain = path.starts_with('/') && !path.bytes().any(|b| b <= b' ' || b == 0x7f);
        refuse_if(!plain, &format!("{path:?} is no HTTP path"))?;
    }
    let files: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(path, bytes)| (path.to_string(), bytes.to_vec()))
        .collect();
    host::netns::run_in(netns, move || check_files(addr, &files, rounds))
        .map_err(lab::LabError::from)?
}

fn check_files(
    addr: SocketAddr,
    files: &[(String, Vec<u8>)],
    rounds: u32,
) -> Result<Verification, ExpError> {
    let mut conn = Some(connect_retrying(addr, CONNECT_PATIENCE)?);
    // One new connection after a failed request; after a second failure
    // the rest are not sent.
    let mut reconnects = 1u32;
    let mut lost: Option<String> = None;
    let mut found = Verification::default();
    for (path, want) in (0..rounds).flat_map(|_| files) {
        if let Some(why) = &lost {
            found.record(Err(format!(
                "GET {path}: not sent, the connection failed ({why})"
            )));
            continue;
        }
        let reply = conn
            .take()
            .map_or_else(|| Connection::open(addr), Ok)
            .and_then(|mut c| c.get(addr, path).map(|reply| (c, reply)));
        match reply {
            Ok((c, reply)) => {
                found.record(compare(path, want, &reply));
                conn = (!reply.close).then_some(c);
            }
            Err(e) => {
                found.record(Err(format!("GET {path}: {e}")));
                match reconnects.checked_sub(1) {
                    Some(left) => reconnects = left,
                    None => lost = Some(e.to_string()),
                }
            }
        }
    }
    Ok(found)
}

/// Connects to `addr`, retrying for `patience` while it is refused.
fn connect_retrying(addr: SocketAddr, patience: Duration) -> Result<Connection, ExpError> {
    connect_when_listening(addr, patience)
        .and_then(Connection::over)
        .map_err(|e| ExpError::Program {
            program: "the HTTP content check".into(),
            detail: format!("connect to {addr}: {e}"),
        })
}

/// Whether a reply matched: status 200 and the file's bytes.
fn compare(path: &str, want: &[u8], got: &Reply) -> Result<(), String> {
    let (got_len, want_len) = (got.body.len(), want.len());
    if got.status != 200 {
        return Err(format!(
            "GET {path}: status {} with {got_len} bytes, the file has {want_len}",
            got.status
        ));
    }
    match first_difference(want, &got.body) {
        None => Ok(()),
        Some(at) => Err(format!(
            "GET {path}: {got_len} bytes, the file has {want_len}; they differ from byte {at}"
        )),
    }
}

struct Connection(BufReader<TcpStream>);

impl Connection {
    fn open(addr: SocketAddr) -> io::Result<Connection> {
        Connection::over(TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?)
    }

    /// A connection over `stream`, with the check's timeouts.
    fn over(stream: TcpStream) -> io::Result<Connection> {
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_write_timeout(Some(READ_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Connection(BufReader::new(stream)))
    }

    /// One request and its reply. RFC 9112 §3: request-line = method SP
    /// request-target SP HTTP-version; a Host field is required (§3.2).
    fn get(&mut self, addr: SocketAddr, path: &str) -> io::Result<Reply> {
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        self.0.get_mut().write_all(request.as_bytes())?;
        read_reply(&mut self.0)
    }
}

#[derive(Debug, PartialEq)]
struct Reply {
    status: u16,
    body: Vec<u8>,
    /// The server closes the connection after this reply.
    close: bool,
}

fn malformed(what: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, what)
}

/// Reads one reply framed by Content-Length (RFC 9112 §6.3); any other
/// framing, or a malformed head, is an error, as the connection cannot
/// be read further.
fn read_reply(reader: &mut impl BufRead) -> io::Result<Reply> {
    // §4: status-line = HTTP-version SP status-code SP [ reason-phrase ].
    let status_line = read_line(reader)?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let status = parts
        .next()
        .filter(|code| code.len() == 3 && code.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|code| code.parse().ok())
        .filter(|_| version.starts_with("HTTP/1."))
        .ok_or_else(|| malformed(format!("not an HTTP/1.x status line: {status_line:?}")))?;
    // §9.3: only HTTP/1.1 keeps the connection open by default.
    let mut close = version != "HTTP/1.1";
    let mut length: Option<u64> = None;
    // §5: field-line = field-name ":" OWS field-value OWS, up to an empty line.
    for _ in 0..MAX_FIELDS {
        let line = read_line(reader)?;
        if line.is_empty() {
            let length = length.ok_or_else(|| malformed("no Content-Length".into()))?;
            let body = read_body(reader, length)?;
            return Ok(Reply {
                status,
                body,
                close,
            });
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| malformed(format!("not a header line: {line:?}")))?;
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case("content-length") {
            // §6.3: 1*DIGIT; differing repeated values make the framing invalid.
            let n = Some(value)
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse().ok())
                .filter(|n| length.is_none_or(|l| l == *n))
                .ok_or_else(|| malformed(format!("a bad Content-Length: {value:?}")))?;
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // §6.3: it would override Content-Length; this check reads only that.
            return Err(malformed(format!("Transfer-Encoding {value:?}")));
        } else if name.eq_ignore_ascii_case("connection") {
            // §9.6: the "close" option.
            close |= value
                .split(',')
                .any(|option| option.trim().eq_ignore_ascii_case("close"));
        }
    }
    Err(malformed(format!("more than {MAX_FIELDS} header lines")))
}

fn read_body(reader: &mut impl BufRead, length: u64) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    reader.take(length).read_to_end(&mut body)?;
    if (body.len() as u64) < length {
        return Err(io::Error::new(
            ErrorKind::UnexpectedEof,
            format!("closed after {} of {length} body bytes", body.len()),
        ));
    }
    Ok(body)
}

/// One line without its CRLF (§2.2 lets a recipient accept a bare LF).
fn read_line(reader: &mut impl BufRead) -> io::Result<String> {
    let mut line = Vec::new();
    reader.take(MAX_LINE).read_until(b'\n', &mut line)?;
    match line.last() {
        Some(b'\n') => {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            Ok(String::from_utf8_lossy(&line).into_owned())
        }
        Some(_) if line.len() as u64 == MAX_LINE => {
            Err(malformed(format!("a line longer than {MAX_LINE} bytes")))
        }
        _ => Err(io::Error::new(
            ErrorKind::UnexpectedEof,
            "the server closed the connection",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::net::TcpListener;
    use std::process::Child;
    use std::time::Instant;

    /// wrk's own report, which the summary line comes among.
    const REPORT: &str = "Running 1s test @ http://127.0.0.1:8080/
  1 threads and 4 connections
  0 requests in 1.00s, 0.00B read
";

    fn summary_line(requests: u64, percentiles: &str) -> String {
        format!(
            "{WRK_MARK}{{\"requests\":{requests},\"duration_us\":2000000,\"bytes\":9000,\
             \"errors\":{{\"connect\":1,\"read\":2,\"write\":3,\"status\":4,\"timeout\":5}},\
             {percentiles}}}\n"
        )
    }

    #[test]
    fn reads_the_summary_line_among_wrk_s_report() {
        let line = summary_line(300, r#""p50_us":40.0,"p99_us":90.0,"p999_us":250.5"#);
        let run = parse_wrk(&format!("{REPORT}{line}Requests/sec: 150\n")).unwrap();
        assert_eq!(
            run,
            ClientRun {
                requests: 300,
                seconds: 2.0,
                errors: 15,
                p50_us: Some(40.0),
                p99_us: Some(90.0),
                p999_us: Some(250.5),
            }
        );
    }

    #[test]
    fn an_empty_run_parses_without_latencies() {
        for percentiles in [r#""p50_us":null,"p99_us":null,"p999_us":null"#, r#""x":1"#] {
            let run = parse_wrk(&summary_line(0, percentiles)).unwrap();
            assert_eq!((run.requests, run.rate()), (0, Some(0.0)));
            assert_eq!((run.p50_us, run.p99_us, run.p999_us), (None, None, None));
        }
    }

    fn wrk_detail(stdout: &str) -> String {
        match parse_wrk(stdout) {
            Err(ExpError::Program { program, detail }) if program == "wrk" => detail,
            other => panic!("expected a wrk error for {stdout:?}, got {other:?}"),
        }
    }

    #[test]
    fn broken_output_is_an_error_naming_what_is_wrong() {
        assert!(wrk_detail(REPORT).contains("no 'steer-wrk: ' line"));
        assert!(wrk_detail("").contains("no 'steer-wrk: ' line"));
        assert!(wrk_detail("steer-wrk: {not json").contains("{not json"));
        let text = summary_line(1, r#""p50_us":"fast""#);
        assert!(wrk_detail(&text).contains("invalid type"), "{text}");
        let text = summary_line(1, r#""x":1"#).replace(r#""requests":1"#, r#""requests":"1""#);
        assert!(wrk_detail(&text).contains("invalid type"), "{text}");
        assert!(wrk_detail("steer-wrk: garbage").contains("garbage"));
        assert!(wrk_detail(&summary_line(1, r#""p99_us":-1"#)).contains("p99_us"));
        let twice = summary_line(1, r#""x":1"#).repeat(2);
        assert!(wrk_detail(&twice).contains("more than one"));
        let huge = summary_line(1, r#""x":1"#).replace(":5}", &format!(":{}}}", u64::MAX));
        assert!(wrk_detail(&huge).contains("overflow"), "{huge}");
    }

    #[test]
    fn a_reply_is_framed_by_its_content_length() {
        let text = "HTTP/1.1 200 OK\r\nServer: x\r\ncontent-length:  5 \r\n\r\nhelloHTTP/1.1";
        let mut reader = Cursor::new(text.as_bytes());
        let reply = read_reply(&mut reader).unwrap();
        assert_eq!(
            (reply.status, &reply.body[..], reply.close),
            (200, &b"hello"[..], false)
        );
        assert_eq!(
            read_line(&mut reader).unwrap_err().kind(),
            ErrorKind::UnexpectedEof
        );
        let close = "HTTP/1.1 404 Not Found\nConnection: keep-alive, Close\nContent-Length: 0\n\n";
        let reply = read_reply(&mut Cursor::new(close.as_bytes())).unwrap();
        assert_eq!(
            (reply.status, reply.body.len(), reply.close),
            (404, 0, true)
        );
    }

    #[test]
    fn a_reply_the_check_cannot_frame_is_an_error() {
        for (text, says) in [
            ("HTTP/1.1 200 OK\r\n\r\n", "no Content-Length"),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                "Transfer-Encoding",
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                "Content-Length",
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nab",
                "Content-Length",
            ),
            ("HTTP/1.1 2000 OK\r\n\r\n", "status line"),
            ("SSH-2.0-x\r\n", "status line"),
            ("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "header line"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", "3 of 9"),
            ("HTTP/1.1 200 OK\r\nContent-", "closed"),
        ] {
            let e = read_reply(&mut Cursor::new(text.as_bytes())).unwrap_err();
            assert!(e.to_string().contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_wrong_body_is_named_with_its_first_differing_byte() {
        let reply = |status, body: &[u8]| Reply {
            status,
            body: body.to_vec(),
            close: false,
        };
        assert_eq!(compare("/a", b"abc", &reply(200, b"abc")), Ok(()));
        let e = compare("/a", b"abcd", &reply(200, b"abXd")).unwrap_err();
        assert_eq!(
            e,
            "GET /a: 4 bytes, the file has 4; they differ from byte 2"
        );
        assert!(compare("/a", b"abcd", &reply(200, b"ab"))
            .unwrap_err()
            .contains("byte 2"));
        assert!(compare("/a", b"abc", &reply(500, b"abc"))
            .unwrap_err()
            .contains("status 500"));
    }

    /// A server that answers one request on its first connection, then
    /// closes it, and closes its second connection unanswered.
    #[test]
    fn after_a_lost_connection_one_reconnect_then_the_rest_are_wrong() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut first, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = first.read(&mut request).unwrap();
            first
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
                .unwrap();
            drop(first);
            drop(listener.accept().unwrap());
        });
        let found = verify_files(None, addr, &[("/hi", b"hi")], 4).unwrap();
        server.join().unwrap();
        assert_eq!((found.checked, found.wrong), (4, 3), "{found:?}");
        assert!(found.first_wrong.unwrap().starts_with("GET /hi: "));
    }

    #[test]
    fn a_refused_connection_is_retried_until_the_patience_runs_out() {
        let refused = testkit::RefusingPort::new();
        let patience = Duration::from_millis(300);
        let started = Instant::now();
        let Err(e) = connect_retrying(refused.addr(), patience) else {
            panic!("connected to {}", refused.addr());
        };
        assert!(started.elapsed() >= patience, "{e}");
        assert!(e.to_string().contains("refused"), "{e}");
    }

    /// nginx on loopback with a private configuration, killed on drop.
    struct Nginx {
        child: Child,
        dir: testkit::TempDir,
    }

    impl Nginx {
        /// Serves `files` (names under the root) on `port`; at most 5
        /// requests a connection, so a check crosses a server's close.
        fn start(port: u16, files: &[(&str, &[u8])]) -> Nginx {
            let dir = testkit::TempDir::new("steer-nginx");
            let d = dir.path().display();
            std::fs::create_dir(dir.join("www")).unwrap();
            for (name, bytes) in files {
                std::fs::write(dir.join("www").join(name), bytes).unwrap();
            }
            let temp_paths: String = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
                .map(|t| format!("{t}_temp_path {d}/{t}_temp;\n"))
                .concat();
            let conf = format!(
                "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
                 events {{ worker_connections 64; }}\n\
                 http {{\n{temp_paths}access_log off;\nsendfile on;\nkeepalive_requests 5;\n\
                 default_type application/octet-stream;\n\
                 server {{ listen 127.0.0.1:{port}; root {d}/www; }}\n}}\n"
            );
            std::fs::write(dir.join("nginx.conf"), conf).unwrap();
            let child = Command::new("nginx")
                .args(["-p", &d.to_string(), "-e", &format!("{d}/error.log"), "-c"])
                .arg(dir.join("nginx.conf"))
                .stdin(Stdio::null())
                .spawn()
                .unwrap();
            Nginx { child, dir }
        }

        fn error_log(&self) -> String {
            std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
        }
    }

    impl Drop for Nginx {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    #[test]
    #[ignore = "needs nginx and wrk: make test runs it"]
    fn nginx_serves_the_files_and_wrk_measures_it() {
        testkit::require_program("nginx", "make deps installs it");
        testkit::require_program("wrk", "make deps installs it");
        let big: Vec<u8> = (0..1u32 << 20)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let small = b"steer checks nginx\n".as_slice();
        let port = testkit::free_port();
        let nginx = Nginx::start(port, &[("small.txt", small), ("big.bin", &big)]);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let files = [("/small.txt", small), ("/big.bin", big.as_slice())];
        let found = verify_files(None, addr, &files, 4)
            .unwrap_or_else(|e| panic!("{e}\nnginx's log:\n{}", nginx.error_log()));
        assert!(
            found.passed() && found.checked == 8,
            "{found:?}\n{}",
            nginx.error_log()
        );
        let mut wrong = big.clone();
        wrong[1000] ^= 1;
        let found = verify_files(None, addr, &[("/big.bin", &wrong)], 2).unwrap();
        assert_eq!((found.checked, found.wrong), (2, 2));
        let why = found.first_wrong.unwrap();
        assert!(
            why.contains("/big.bin") && why.contains("byte 1000"),
            "{why}"
        );
        let url = format!("http://{addr}/small.txt");
        let run = wrk(None, &url, 1, 4, 1.0, &[]).unwrap();
        assert!(
            run.requests > 0 && run.errors == 0,
            "{run:?}\n{}",
            nginx.error_log()
        );
        let (p50, p99, p999) = (
            run.p50_us.unwrap(),
            run.p99_us.unwrap(),
            run.p999_us.unwrap(),
        );
        assert!(0.0 < p50 && p50 <= p99 && p99 <= p999, "{run:?}");
        assert!(run.seconds >= 0.9, "{run:?}");
    }
}

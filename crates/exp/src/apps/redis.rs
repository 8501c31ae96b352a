//! redis-server's side of the apps experiment: load from redis-benchmark,
//! read from its `--csv` report, and a content check through a RESP2
//! client of our own that writes binary values and reads them back.
//!
//! The wire format is the Redis serialization protocol, RESP2
//! (<https://redis.io/docs/reference/protocol-spec/>): a command is an
//! array of bulk strings (`*N\r\n` then `$len\r\n<bytes>\r\n` each); a
//! reply's first byte gives its type: `+` simple string, `-` error, `:`
//! integer, `$` bulk string (`$-1\r\n` is the null bulk string).

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::process::{Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::client::{
    connect_when_listening, first_difference, ClientRun, Verification, CONNECT_PATIENCE,
};
use crate::{refuse_if, ExpError};

const BENCHMARK: &str = "redis-benchmark";
/// How long a refused connection is retried: the server may still start.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// The keys the content check writes, then deletes.
const VERIFY_PREFIX: &str = "steer:verify:";
/// Longer reply lines are no reply from redis-server.
const MAX_LINE: u64 = 64 * 1024;
/// redis-server's largest bulk string (its default proto-max-bulk-len).
const MAX_BULK: i64 = 512 * 1024 * 1024;
/// redis-benchmark spins, without end, when it cannot connect: a run that
/// lasts longer than a floor rate of this many requests per second (far
/// below any server's) plus a minute is killed.
const FLOOR_RATE: u64 = 1000;

fn benchmark_error(detail: impl Into<String>) -> ExpError {
    ExpError::Program {
        program: BENCHMARK.into(),
        detail: detail.into(),
    }
}

/// Parses `redis-benchmark --csv` (Redis 7): a header naming the columns,
/// then a row per test. Columns are found by name. The CSV has a rate
/// but no count, so `requests` is the `-n` the run was given and
/// `seconds = requests / rps` (redis-benchmark's own rps is `-n` over its
/// elapsed time). Its CSV has no 99.9th percentile: absent. errors is 0:
/// redis-benchmark exits non-zero at the first error reply, so a run that
/// parses had none.
pub fn parse_benchmark_csv(
    text: &str,
    requests: u64,
) -> Result<Vec<(String, ClientRun)>, ExpError> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = csv_fields(
        lines
            .next()
            .ok_or_else(|| benchmark_error("no CSV header"))?,
    )?;
    let column = |name: &str| {
        header.iter().position(|h| h == name).ok_or_else(|| {
            benchmark_error(format!("no column {name:?} in its CSV header {header:?}"))
        })
    };
    let [test, rps, p50, p99] = [
        column("test")?,
        column("rps")?,
        column("p50_latency_ms")?,
        column("p99_latency_ms")?,
    ];
    lines
        .map(|line| {
            let row = csv_fields(line)?;
            if row.len() != header.len() {
                return Err(benchmark_error(format!(
                    "a row of {} fields under a header of {}: {line:?}",
                    row.len(),
                    header.len()
                )));
            }
            // Column `at` times `scale`: finite and not negative.
            let number = |at: usize, scale: f64| {
                row[at]
                    .parse::<f64>()
                    .ok()
                    .map(|x| x * scale)
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| {
                        benchmark_error(format!("{:?} is no {} in {line:?}", row[at], header[at]))
                    })
            };
            // It times a test in whole milliseconds: one done within one
            // has the rate "inf", and no interval to report.
            if row[rps] == "inf" {
                return Err(benchmark_error(format!(
                    "{} ran within its 1 ms clock (rps inf): give it more requests",
                    row[test]
                )));
            }
            let seconds = requests as f64 / number(rps, 1.0)?;
            if !seconds.is_finite() {
                return Err(benchmark_error(format!(
                    "no interval from the rate in {line:?}"
                )));
            }
            let run = ClientRun {
                requests,
                seconds,
                errors: 0,
                p50_us: Some(number(p50, 1000.0)?),
                p99_us: Some(number(p99, 1000.0)?),
                p999_us: None,
            };
            Ok((row[test].clone(), run))
        })
        .collect()
}

/// The fields of one CSV line: comma-separated, each plain or in double
/// quotes (a quote inside written twice), as redis-benchmark writes them.
fn csv_fields(line: &str) -> Result<Vec<String>, ExpError> {
    let mut fields = Vec::new();
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    loop {
        let mut field = String::new();
        if chars.next_if_eq(&'"').is_some() {
            loop {
                match chars.next() {
                    Some('"') if chars.next_if_eq(&'"').is_some() => field.push('"'),
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err(benchmark_error(format!("an unclosed quote in {line:?}"))),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|&c| c != ',') {
                field.push(c);
            }
        }
        fields.push(field);
        match chars.next() {
            None => return Ok(fields),
            Some(',') => {}
            Some(c) => {
                return Err(benchmark_error(format!(
                    "{c:?} after a quoted field in {line:?}"
                )))
            }
        }
    }
}

/// Runs redis-benchmark's `tests` (its `-t` names: get, set, lpush...)
/// against `host:port` from namespace `netns` (None: this one) on `cpus`
/// (empty: anywhere), with random keys (`-r`), and returns a row per test.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_benchmark(
    netns: Option<&str>,
    host: IpAddr,
    port: u16,
    tests: &[&str],
    clients: u32,
    requests: u64,
    pipeline: u32,
    cpus: &[usize],
) -> Result<Vec<(String, ClientRun)>, ExpError> {
    refuse_if(tests.is_empty(), "redis-benchmark needs a test to run")?;
    let plain =
        |t: &&str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    refuse_if(
        !tests.iter().all(plain),
        "redis-benchmark's tests are plain names",
    )?;
    refuse_if(
        clients == 0 || requests == 0 || pipeline == 0,
        "redis-benchmark needs clients, requests and a pipeline depth of at least 1",
    )?;
    // Fail plainly here rather than let redis-benchmark spin.
    let addr = SocketAddr::new(host, port);
    host::netns::run_in(netns, move || {
        connect_when_listening(addr, CONNECT_PATIENCE)
    })
    .map_err(lab::LabError::from)?
    .map_err(|e| benchmark_error(format!("connect to {addr}: {e}")))?;
    let mut cmd = Command::new(BENCHMARK);
    cmd.args(["-h", &host.to_string(), "-p", &port.to_string()])
        .args(["-c", &clients.to_string(), "-n", &requests.to_string()])
        .args(["-P", &pipeline.to_string(), "-r", "100000"])
        .args(["-t", &tests.join(","), "--csv", "-q"]);
    if let Some(name) = netns {
        host::netns::enter_in_child(&mut cmd, name).map_err(lab::LabError::from)?;
    }
    host::cpu::pin_in_child(&mut cmd, cpus);
    let work = requests.saturating_mul(tests.len() as u64);
    let limit = Duration::from_secs(60 + work / FLOOR_RATE);
    let output = output_within(cmd, limit)?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(benchmark_error(format!(
            "{}: {}",
            output.status,
            stderr.trim()
        )));
    }
    let rows = parse_benchmark_csv(&String::from_utf8_lossy(&output.stdout), requests)?;
    for test in tests {
        if !rows.iter().any(|(name, _)| is_row_of(name, test)) {
            return Err(benchmark_error(format!(
                "no row for the test {test} ({})",
                stderr.trim()
            )));
        }
    }
    Ok(rows)
}

/// Whether a row named `row` reports `-t test`: the same name, or the
/// name and a variant (`ping` gives PING_INLINE and PING_MBULK, `lrange`
/// LRANGE_100 (first 100 elements) and more).
fn is_row_of(row: &str, test: &str) -> bool {
    let row = row.to_ascii_lowercase();
    row.strip_prefix(test)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['_', ' ']))
}

/// Runs `cmd` to its end and collects its output; killed after `limit`.
fn output_within(mut cmd: Command, limit: Duration) -> Result<Output, ExpError> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => ExpError::MissingProgram {
                program: BENCHMARK.into(),
            },
            _ => benchmark_error(e.to_string()),
        })?;
    // Read both pipes as it runs, so a full pipe cannot stop it.
    let (stdout, stderr) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => break Err(format!("still running after {} s", limit.as_secs())),
            Err(e) => break Err(format!("waiting for it: {e}")),
        }
    };
    let status = match status {
        Ok(status) => status,
        Err(why) => {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = stderr.join().unwrap_or_default();
            let stderr = String::from_utf8_lossy(&stderr);
            return Err(benchmark_error(format!("{why}, killed: {}", stderr.trim())));
        }
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Writes `keys` values of varied length and bytes (line ends, NULs, a
/// null-bulk header, one of 1 MiB) to the server at `addr`, from namespace
/// `netns`, reads each back and deletes them: one item per key. Only a
/// failed connection is an error; a wrong or error reply is a wrong item.
pub(crate) fn verify(
    netns: Option<&str>,
    addr: SocketAddr,
    keys: u32,
) -> Result<Verification, ExpError> {
    refuse_if(keys == 0, "the Redis content check needs a key")?;
    host::netns::run_in(netns, move || check_values(addr, keys)).map_err(lab::LabError::from)?
}

fn check_values(addr: SocketAddr, keys: u32) -> Result<Verification, ExpError> {
    let lost = |what: &str, e: io::Error| ExpError::Program {
        program: "the Redis content check".into(),
        detail: format!("{what} at {addr}: {e}"),
    };
    let mut conn = Connection::open(addr).map_err(|e| lost("connect", e))?;
    let names: Vec<String> = (0..keys).map(|i| format!("{VERIFY_PREFIX}{i}")).collect();
    let mut stored = Vec::new();
    for (i, key) in (0..).zip(&names) {
        let reply = conn
            .call(&[b"SET", key.as_bytes(), &verify_value(i)])
            .map_err(|e| lost("SET", e))?;
        stored.push(match reply {
            Reply::Status(ok) if ok == "OK" => Ok(()),
            other => Err(format!("SET {key}: the reply {other:?}")),
        });
    }
    let mut found = Verification::default();
    for ((i, key), stored) in (0..).zip(&names).zip(stored) {
        let reply = conn
            .call(&[b"GET", key.as_bytes()])
            .map_err(|e| lost("GET", e))?;
        found.record(stored.and_then(|()| compare(key, &verify_value(i), &reply)));
    }
    let del: Vec<&[u8]> = std::iter::once(&b"DEL"[..])
        .chain(names.iter().map(|k| k.as_bytes()))
        .collect();
    match conn.call(&del).map_err(|e| lost("DEL", e))? {
        Reply::Integer(_) => Ok(found),
        other => Err(lost(
            "DEL",
            io::Error::other(format!("the reply {other:?}")),
        )),
    }
}

/// The value the check writes to key `i`: pseudo-random bytes of one of a
/// few lengths (0 to 64 KiB; key 0 has 1 MiB), with bytes that break naive
/// framing in the middle.
fn verify_value(i: u32) -> Vec<u8> {
    const LENGTHS: [usize; 8] = [0, 1, 2, 9, 100, 1000, 4096, 65_543];
    const TRICKY: &[u8] = b"\r\n\0$-1\r\n";
    let len = if i == 0 {
        1 << 20
    } else {
        LENGTHS[i as usize % LENGTHS.len()]
    };
    let mut state = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut value: Vec<u8> = (0..len)
        .map(|_| {
            // xorshift64 (Marsaglia 2003).
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 56) as u8
        })
        .collect();
    let at = len / 2;
    let n = TRICKY.len().min(len - at);
    value[at..at + n].copy_from_slice(&TRICKY[..n]);
    value
}

/// Whether a GET reply is the value set.
fn compare(key: &str, want: &[u8], got: &Reply) -> Result<(), String> {
    let got = match got {
        Reply::Bulk(Some(bytes)) => bytes,
        Reply::Bulk(None) => {
            return Err(format!(
                "GET {key}: no value, {} bytes were set",
                want.len()
            ))
        }
        other => {
            return Err(format!(
                "GET {key}: the reply {other:?}, {} bytes were set",
                want.len()
            ))
        }
    };
    match first_difference(want, got) {
        None => Ok(()),
        Some(at) => Err(format!(
            "GET {key}: {} bytes, {} were set; they differ from byte {at}",
            got.len(),
            want.len()
        )),
    }
}

/// A RESP2 reply, of the types the check's commands get.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Status(String),
    Error(String),
    Integer(i64),
    /// None: the null bulk string (GET of a missing key).
    Bulk(Option<Vec<u8>>),
}

struct Connection(BufReader<TcpStream>);

impl Connection {
    fn open(addr: SocketAddr) -> io::Result<Connection> {
        let stream = connect_when_listening(addr, CONNECT_PATIENCE)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(Connection(BufReader::new(stream)))
    }

    /// Sends one command and reads its reply.
    fn call(&mut self, args: &[&[u8]]) -> io::Result<Reply> {
        self.0.get_mut().write_all(&encode_command(args))?;
        read_reply(&mut self.0)
    }
}

/// A command as RESP sends it: an array of bulk strings.
fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn malformed(what: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, what)
}

/// Reads one reply; a malformed or cut-off one is an error.
fn read_reply(reader: &mut impl BufRead) -> io::Result<Reply> {
    let line = read_line(reader)?;
    let Some((&kind, rest)) = line.split_first() else {
        return Err(malformed("an empty reply line".into()));
    };
    let text = || String::from_utf8_lossy(rest).into_owned();
    match kind {
        b'+' => Ok(Reply::Status(text())),
        b'-' => Ok(Reply::Error(text())),
        b':' => parse_integer(rest).map(Reply::Integer),
        b'$' => match parse_integer(rest)? {
            -1 => Ok(Reply::Bulk(None)),
            len @ 0..=MAX_BULK => read_bulk(reader, len as u64).map(|b| Reply::Bulk(Some(b))),
            len => Err(malformed(format!("a bulk string of length {len}"))),
        },
        _ => Err(malformed(format!("a reply of type {:?}", char::from(kind)))),
    }
}

fn parse_integer(digits: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            malformed(format!(
                "{:?} is no integer",
                String::from_utf8_lossy(digits)
            ))
        })
}

/// A bulk string's `len` bytes and the CRLF after them.
fn read_bulk(reader: &mut impl BufRead, len: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(len + 2).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != len + 2 {
        return Err(io::Error::new(
            ErrorKind::UnexpectedEof,
            "a bulk string cut off",
        ));
    }
    if !bytes.ends_with(b"\r\n") {
        return Err(malformed("a bulk string not followed by CRLF".into()));
    }
    bytes.truncate(len as usize);
    Ok(bytes)
}

/// One line, without its CRLF.
fn read_line(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    reader.take(MAX_LINE).read_until(b'\n', &mut line)?;
    match line.strip_suffix(b"\r\n") {
        Some(content) => Ok(content.to_vec()),
        None if line.len() as u64 == MAX_LINE => {
            Err(malformed(format!("a reply line over {MAX_LINE} bytes")))
        }
        None => Err(io::Error::new(
            ErrorKind::UnexpectedEof,
            "a reply line cut off",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `redis-benchmark -c 4 -n 2000 -r 100000 -t get,set,lpush --csv -q`
    /// against redis-server 7.0 on this machine.
    const REAL_CSV: &str = r#""test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"SET","55555.56","0.053","0.008","0.047","0.103","0.159","0.359"
"GET","57142.86","0.054","0.008","0.047","0.103","0.175","3.167"
"LPUSH","45454.55","0.067","0.008","0.055","0.135","0.383","1.303"
"#;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    fn detail(e: ExpError) -> String {
        match e {
            ExpError::Program { program, detail } if program == BENCHMARK => detail,
            other => panic!("not a redis-benchmark error: {other}"),
        }
    }

    #[test]
    fn a_real_report_gives_a_row_per_test() {
        let rows = parse_benchmark_csv(REAL_CSV, 2000).unwrap();
        let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["SET", "GET", "LPUSH"]);
        let get = &rows[1].1;
        assert_eq!((get.requests, get.errors), (2000, 0));
        assert!(close(get.seconds, 2000.0 / 57142.86), "{}", get.seconds);
        assert!(close(get.rate().unwrap(), 57142.86));
        assert!(close(get.p50_us.unwrap(), 47.0) && close(get.p99_us.unwrap(), 175.0));
        assert_eq!(get.p999_us, None, "the CSV has no p99.9: absent, not 0");
    }

    #[test]
    fn columns_are_found_by_name() {
        let csv = "\"p99_latency_ms\",\"rps\",\"test\",\"p50_latency_ms\"\n\"0.2\",\"1000\",\"MSET (10 keys)\",\"0.1\"\n";
        let rows = parse_benchmark_csv(csv, 500).unwrap();
        assert_eq!(rows[0].0, "MSET (10 keys)");
        let run = &rows[0].1;
        assert!(
            close(run.seconds, 0.5)
                && close(run.p50_us.unwrap(), 100.0)
                && close(run.p99_us.unwrap(), 200.0)
        );
    }

    #[test]
    fn broken_reports_are_errors_naming_what_is_wrong() {
        let missing = REAL_CSV.replace("p99_latency_ms", "p98_latency_ms");
        assert!(detail(parse_benchmark_csv(&missing, 1).unwrap_err()).contains("p99_latency_ms"));
        let words = REAL_CSV.replace("57142.86", "fast");
        assert!(detail(parse_benchmark_csv(&words, 1).unwrap_err()).contains("\"fast\" is no rps"));
        let instant = REAL_CSV.replace("57142.86", "inf");
        assert!(detail(parse_benchmark_csv(&instant, 1).unwrap_err()).contains("GET ran within"));
        let zero = REAL_CSV.replace("57142.86", "0");
        assert!(detail(parse_benchmark_csv(&zero, 1).unwrap_err()).contains("no interval"));
        let huge = REAL_CSV.replace("0.175", "1e307");
        assert!(detail(parse_benchmark_csv(&huge, 1).unwrap_err()).contains("p99_latency_ms"));
        let negative = REAL_CSV.replace("0.175", "-1");
        assert!(detail(parse_benchmark_csv(&negative, 1).unwrap_err()).contains("p99_latency_ms"));
        let short = REAL_CSV.replace(",\"3.167\"", "");
        assert!(detail(parse_benchmark_csv(&short, 1).unwrap_err()).contains("7 fields"));
        let unclosed = REAL_CSV.replace("\"3.167\"", "\"3.167");
        assert!(detail(parse_benchmark_csv(&unclosed, 1).unwrap_err()).contains("unclosed quote"));
        let glued = REAL_CSV.replace("\"GET\"", "\"GET");
        assert!(
            detail(parse_benchmark_csv(&glued, 1).unwrap_err()).contains("after a quoted field")
        );
        assert!(detail(parse_benchmark_csv("", 1).unwrap_err()).contains("no CSV header"));
        for garbage in [
            "Could not connect to Redis",
            "\"a\"x,b",
            "\u{0}\u{1},,,\"",
            "\"test\"\n\"x\"",
        ] {
            assert!(parse_benchmark_csv(garbage, 1).is_err(), "{garbage:?}");
        }
        // Only the header: the run's caller says which test is missing.
        assert_eq!(
            parse_benchmark_csv(REAL_CSV.lines().next().unwrap(), 1).unwrap(),
            vec![]
        );
    }

    #[test]
    fn fields_may_be_quoted_with_commas_and_quotes_inside() {
        assert_eq!(
            csv_fields(r#""a,b","say ""hi""",plain,"#).unwrap(),
            ["a,b", "say \"hi\"", "plain", ""]
        );
    }

    #[test]
    fn a_test_s_rows_include_its_variants() {
        assert!(is_row_of("GET", "get") && is_row_of("PING_INLINE", "ping"));
        assert!(is_row_of("LRANGE_100 (first 100 elements)", "lrange"));
        assert!(!is_row_of("LPUSH", "lpop") && !is_row_of("GETSET", "get"));
    }

    fn reply(bytes: &[u8]) -> io::Result<Reply> {
        read_reply(&mut &bytes[..])
    }

    #[test]
    fn each_reply_type_is_read() {
        assert_eq!(reply(b"+OK\r\n").unwrap(), Reply::Status("OK".into()));
        assert_eq!(
            reply(b"-ERR wrong\r\n").unwrap(),
            Reply::Error("ERR wrong".into())
        );
        assert_eq!(reply(b":-42\r\n").unwrap(), Reply::Integer(-42));
        assert_eq!(reply(b"$0\r\n\r\n").unwrap(), Reply::Bulk(Some(vec![])));
        assert_eq!(reply(b"$-1\r\n").unwrap(), Reply::Bulk(None));
        let inner = b"a\r\n\0$-1\r\n";
        let mut framed = format!("${}\r\n", inner.len()).into_bytes();
        framed.extend_from_slice(inner);
        framed.extend_from_slice(b"\r\n+next\r\n");
        let mut reader = &framed[..];
        assert_eq!(
            read_reply(&mut reader).unwrap(),
            Reply::Bulk(Some(inner.to_vec()))
        );
        assert_eq!(
            read_reply(&mut reader).unwrap(),
            Reply::Status("next".into())
        );
    }

    #[test]
    fn a_truncated_or_malformed_reply_is_an_error() {
        let cut = [
            &b""[..],
            b"+OK",
            b"+OK\r",
            b"$5\r\nab",
            b"$5\r\nabcde",
            b"$5\r\nabcde\r",
        ];
        for bytes in cut {
            let e = reply(bytes).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::UnexpectedEof, "{bytes:?}: {e}");
        }
        let bad = [
            &b"\r\n"[..],
            b"*1\r\n",
            b":x\r\n",
            b"$-2\r\n",
            b"$99999999999\r\n",
            b"$2\r\nabcd\r\n",
        ];
        for bytes in bad {
            let e = reply(bytes).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidData, "{bytes:?}: {e}");
        }
        let long = vec![b'+'; MAX_LINE as usize + 10];
        assert!(reply(&long).unwrap_err().to_string().contains("over"));
    }

    #[test]
    fn a_command_is_an_array_of_bulk_strings() {
        assert_eq!(
            encode_command(&[b"SET", b"k", b"a\r\nb"]),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n"
        );
    }

    #[test]
    fn the_check_s_values_vary_and_differences_are_named() {
        assert_eq!(verify_value(0).len(), 1 << 20);
        assert_eq!(verify_value(0), verify_value(0));
        assert!(verify_value(5).windows(3).any(|w| w == b"\r\n\0"));
        assert!((1..9).map(|i| verify_value(i).len()).any(|n| n == 0));
        let want = verify_value(4);
        assert_eq!(
            compare("k", &want, &Reply::Bulk(Some(want.clone()))),
            Ok(())
        );
        let mut got = want.clone();
        got[7] ^= 1;
        let why = compare("k", &want, &Reply::Bulk(Some(got))).unwrap_err();
        assert!(
            why.contains("GET k") && why.contains("from byte 7"),
            "{why}"
        );
        let why = compare("k", &want, &Reply::Bulk(Some(want[..50].to_vec()))).unwrap_err();
        assert!(
            why.contains("50 bytes, 100 were set") && why.contains("byte 50"),
            "{why}"
        );
        assert!(compare("k", &want, &Reply::Bulk(None))
            .unwrap_err()
            .contains("no value"));
        assert!(compare("k", &want, &Reply::Error("ERR x".into()))
            .unwrap_err()
            .contains("ERR x"));
    }

    /// redis-server on a free loopback port, without persistence, stopped
    /// when dropped.
    struct RedisServer {
        child: std::process::Child,
        port: u16,
        _dir: testkit::TempDir,
    }

    impl RedisServer {
        fn start() -> RedisServer {
            let dir = testkit::TempDir::new("steer-redis");
            let port = testkit::free_port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--dir"])
                .arg(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .expect("start redis-server");
            let server = RedisServer {
                child,
                port,
                _dir: dir,
            };
            let stream = connect_when_listening(server.addr(), CONNECT_PATIENCE)
                .expect("redis-server listens");
            let mut conn = Connection(BufReader::new(stream));
            assert_eq!(conn.call(&[b"PING"]).unwrap(), Reply::Status("PONG".into()));
            server
        }

        fn addr(&self) -> SocketAddr {
            SocketAddr::from(([127, 0, 0, 1], self.port))
        }
    }

    impl Drop for RedisServer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    #[test]
    #[ignore = "needs redis-server: make test runs it"]
    fn redis_stores_what_it_is_given_and_redis_benchmark_measures_it() {
        testkit::require_program("redis-server", "make deps installs it");
        testkit::require_program(BENCHMARK, "make deps installs it");
        let server = RedisServer::start();
        let found = verify(None, server.addr(), 12).unwrap();
        assert!(found.passed() && found.checked == 12, "{found:?}");
        for pipeline in [1, 16] {
            let localhost = server.addr().ip();
            let rows = run_benchmark(
                None,
                localhost,
                server.port,
                &["get", "set", "lpush"],
                4,
                2000,
                pipeline,
                &[],
            )
            .unwrap();
            assert_eq!(rows.len(), 3, "{rows:?}");
            for (test, run) in &rows {
                assert!(run.rate().is_some_and(|r| r > 0.0), "{test}: {run:?}");
                assert!(
                    run.p50_us.unwrap() <= run.p99_us.unwrap(),
                    "{test}: {run:?}"
                );
            }
        }
        // The check left nothing behind.
        let mut conn = Connection::open(server.addr()).unwrap();
        assert_eq!(
            conn.call(&[b"EXISTS", b"steer:verify:0"]).unwrap(),
            Reply::Integer(0)
        );
    }

    #[test]
    fn nothing_listening_is_an_error_not_a_hang() {
        let refusing = testkit::RefusingPort::new();
        let started = Instant::now();
        let e = connect_when_listening(refusing.addr(), Duration::from_millis(300)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        assert!(started.elapsed() >= Duration::from_millis(300));
    }
}

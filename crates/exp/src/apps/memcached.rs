//! memcached's side of the apps experiment: a closed-loop load client of
//! our own (memcached ships none), one thread and connection each, that
//! times every request and checks every value it reads back.
//!
//! The wire format is memcached's text protocol (doc/protocol.txt in its
//! source; /usr/share/doc/memcached/protocol.txt.gz in Debian):
//! "Storage commands" `set <key> <flags> <exptime> <bytes>\r\n<data>\r\n`
//! answered `STORED\r\n`; "Retrieval command" `get <key>\r\n` answered
//! `VALUE <key> <flags> <bytes> [<cas unique>]\r\n<data>\r\n` per key
//! found, then `END\r\n`; "Error strings" `ERROR\r\n`,
//! `CLIENT_ERROR <error>\r\n` and `SERVER_ERROR <error>\r\n`.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::client::{connect_when_listening, first_difference, CONNECT_PATIENCE};
use super::client::{ClientRun, Verification};
use crate::{refuse_if, ExpError};

/// Longer reply lines are no reply: a VALUE line is at most a 250-byte
/// key (protocol.txt, "Keys") and three numbers.
const MAX_LINE: usize = 1024;
/// memcached's largest item (`-I`, at most 1024m).
const MAX_VALUE: usize = 1 << 30;
const MAX_CONNECTIONS: u32 = 1024;
const MAX_SECONDS: f64 = 86_400.0;
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// One value of a retrieval reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    pub key: String,
    pub flags: u32,
    pub data: Vec<u8>,
}

/// A reply to a storage or retrieval command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Stored,
    NotStored,
    Exists,
    NotFound,
    /// The values a retrieval found, up to its END; none: a miss.
    Values(Vec<Value>),
    /// `ERROR`: a command the server does not know (some commands add a
    /// message).
    Error(String),
    ClientError(String),
    ServerError(String),
}

/// Why bytes are no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("a reply line longer than {MAX_LINE} bytes")]
    LineTooLong,
    #[error("a reply line ended by LF without CR")]
    BareLineFeed,
    #[error("the unknown reply line {0:?}")]
    UnknownLine(String),
    #[error("the malformed VALUE line {0:?}")]
    BadValueLine(String),
    #[error("a data block not followed by CRLF")]
    BadDataEnd,
}

/// Parses the reply at the start of `buf`: `Ok(None)` while it is
/// incomplete, else the reply and the bytes it took. Never panics.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, ReplyError> {
    let Some((line, next)) = line_at(buf, 0)? else {
        return Ok(None);
    };
    let text = |rest: &[u8]| String::from_utf8_lossy(rest).into_owned();
    let reply = match line {
        b"STORED" => Reply::Stored,
        b"NOT_STORED" => Reply::NotStored,
        b"EXISTS" => Reply::Exists,
        b"NOT_FOUND" => Reply::NotFound,
        b"END" => Reply::Values(Vec::new()),
        b"ERROR" => Reply::Error(String::new()),
        _ if line.starts_with(b"VALUE ") => return parse_values(buf),
        _ => match first_word(line) {
            (b"ERROR", message) => Reply::Error(text(message)),
            (b"CLIENT_ERROR", message) => Reply::ClientError(text(message)),
            (b"SERVER_ERROR", message) => Reply::ServerError(text(message)),
            _ => return Err(ReplyError::UnknownLine(text(line))),
        },
    };
    Ok(Some((reply, next)))
}

/// A line's first word and the rest after the space that ends it.
fn first_word(line: &[u8]) -> (&[u8], &[u8]) {
    match line.iter().position(|&b| b == b' ') {
        Some(space) => (&line[..space], &line[space + 1..]),
        None => (line, &[]),
    }
}

/// The line starting at `from`, without its CRLF, and where the next
/// starts; None while no line end has arrived.
fn line_at(buf: &[u8], from: usize) -> Result<Option<(&[u8], usize)>, ReplyError> {
    let rest = buf.get(from..).unwrap_or_default();
    let window = &rest[..rest.len().min(MAX_LINE + 2)];
    match window.iter().position(|&b| b == b'\n') {
        Some(end) if end > 0 && rest[end - 1] == b'\r' => {
            Ok(Some((&rest[..end - 1], from + end + 1)))
        }
        Some(_) => Err(ReplyError::BareLineFeed),
        None if window.len() == MAX_LINE + 2 => Err(ReplyError::LineTooLong),
        None => Ok(None),
    }
}

/// VALUE lines, each with its data block, up to END.
fn parse_values(buf: &[u8]) -> Result<Option<(Reply, usize)>, ReplyError> {
    let mut values = Vec::new();
    let mut at = 0;
    loop {
        let Some((line, data_start)) = line_at(buf, at)? else {
            return Ok(None);
        };
        if line == b"END" {
            return Ok(Some((Reply::Values(values), data_start)));
        }
        let (key, flags, len) = parse_value_line(line)?;
        // len <= MAX_VALUE and data_start <= buf.len(): no overflow.
        let Some(block) = buf.get(data_start..data_start + len + 2) else {
            return Ok(None);
        };
        if &block[len..] != b"\r\n" {
            return Err(ReplyError::BadDataEnd);
        }
        let data = block[..len].to_vec();
        values.push(Value { key, flags, data });
        at = data_start + len + 2;
    }
}

/// `VALUE <key> <flags> <bytes> [<cas unique>]`.
fn parse_value_line(line: &[u8]) -> Result<(String, u32, usize), ReplyError> {
    let bad = || ReplyError::BadValueLine(String::from_utf8_lossy(line).into_owned());
    let text = std::str::from_utf8(line).map_err(|_| bad())?;
    let fields: Vec<&str> = text.split(' ').collect();
    let (key, flags, bytes, cas) = match fields[..] {
        ["VALUE", key, flags, bytes] => (key, flags, bytes, None),
        ["VALUE", key, flags, bytes, cas] => (key, flags, bytes, Some(cas)),
        _ => return Err(bad()),
    };
    let key_ok = !key.is_empty() && key.len() <= 250 && !key.bytes().any(|b| b.is_ascii_control());
    let flags = flags
        .parse::<u32>()
        .ok()
        .filter(|_| key_ok)
        .ok_or_else(bad)?;
    let len = bytes
        .parse::<usize>()
        .ok()
        .filter(|&n| n <= MAX_VALUE)
        .ok_or_else(bad)?;
    if cas.is_some_and(|c| c.parse::<u64>().is_err()) {
        return Err(bad());
    }
    Ok((key.to_string(), flags, len))
}

/// The load: closed-loop requests, one outstanding per connection.
#[derive(Debug, Clone)]
pub(crate) struct Load {
    pub connections: u32,
    pub seconds: f64,
    pub value_bytes: usize,
    /// Every N-th request is a SET, the others GETs (0: GETs only).
    pub set_every: u32,
    pub keys_per_connection: u32,
}

impl Load {
    fn check(&self) -> Result<(), ExpError> {
        let connections = format!("the memcached load needs 1 to {MAX_CONNECTIONS} connections");
        refuse_if(
            self.connections == 0 || self.connections > MAX_CONNECTIONS,
            &connections,
        )?;
        refuse_if(
            !(self.seconds > 0.0 && self.seconds <= MAX_SECONDS),
            "the memcached load runs for more than 0 seconds and at most a day",
        )?;
        refuse_if(
            self.keys_per_connection == 0,
            "the memcached load needs a key per connection",
        )?;
        refuse_if(
            self.value_bytes > MAX_VALUE,
            "memcached stores values of at most 1 GiB",
        )
    }
}

fn client_error(detail: impl Into<String>) -> ExpError {
    ExpError::Program {
        program: "the memcached client".into(),
        detail: detail.into(),
    }
}

/// Runs `load` against memcached at `addr` from namespace `netns` (None:
/// this one), a thread per connection pinned round robin to `cpus`
/// (empty: unpinned). Each connection first stores its own keys
/// (`steer:<connection>:<i>`, so none races another on a key); then all
/// start together and run for `load.seconds`. Every GET is checked
/// against the value its connection last stored.
pub(crate) fn run(
    netns: Option<&str>,
    addr: SocketAddr,
    load: &Load,
    cpus: &[usize],
) -> Result<(ClientRun, Verification), ExpError> {
    load.check()?;
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut starts = Vec::new();
    let mut threads = Vec::new();
    for id in 0..load.connections {
        let (start_tx, start_rx) = mpsc::channel();
        let cpu = (!cpus.is_empty()).then(|| cpus[id as usize % cpus.len()]);
        let connector = Connector {
            id,
            addr,
            load: load.clone(),
            cpu,
        };
        let ready = ready_tx.clone();
        threads.push(spawn(netns, move || connector.run(ready, start_rx))?);
        starts.push(start_tx);
    }
    drop(ready_tx);
    // Each thread reports once, or ends without doing so (it could not
    // join the namespace); the channel closes when all have dropped it.
    let ready: Vec<bool> = ready_rx.iter().collect();
    let start = Instant::now();
    if ready.len() == starts.len() && ready.iter().all(|&fine| fine) {
        for s in &starts {
            let _ = s.send(start);
        }
    }
    // Dropped unsent, the start calls the threads off.
    drop(starts);
    let results: Vec<_> = threads.into_iter().map(join).collect();
    let runs = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let runs = runs
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| client_error("called off, and no connection said why"))?;
    Ok(summarize(start, runs))
}

fn spawn<T: Send + 'static>(
    netns: Option<&str>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<Result<T, host::HostError>>, ExpError> {
    match netns {
        Some(name) => Ok(host::netns::spawn_in(name, f).map_err(lab::LabError::from)?),
        None => std::thread::Builder::new()
            .name("memcached-client".into())
            .spawn(move || Ok(f()))
            .map_err(|e| client_error(format!("start a thread: {e}"))),
    }
}

fn join(
    thread: JoinHandle<Result<Result<Option<ConnectionRun>, String>, host::HostError>>,
) -> Result<Option<ConnectionRun>, ExpError> {
    thread
        .join()
        .map_err(|_| client_error("a client thread panicked"))?
        .map_err(lab::LabError::from)?
        .map_err(client_error)
}

/// All connections' runs as one: the interval from the common start to
/// the last connection's end.
fn summarize(start: Instant, runs: Vec<ConnectionRun>) -> (ClientRun, Verification) {
    let ended = runs.iter().map(|r| r.ended).max().unwrap_or(start);
    let latencies: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.latencies_us.iter().copied())
        .collect();
    let mut verification = Verification::default();
    for r in &runs {
        verification.absorb(r.verification.clone());
    }
    let run = ClientRun {
        requests: runs.iter().map(|r| r.requests).sum(),
        seconds: ended.duration_since(start).as_secs_f64(),
        errors: runs.iter().map(|r| r.errors).sum(),
        p50_us: stats::percentile(&latencies, 50.0),
        p99_us: stats::percentile(&latencies, 99.0),
        p999_us: stats::percentile(&latencies, 99.9),
    };
    (run, verification)
}

/// What one connection did in the measured interval.
struct ConnectionRun {
    requests: u64,
    errors: u64,
    latencies_us: Vec<f64>,
    verification: Verification,
    ended: Instant,
}

/// One connection's thread, before it connects.
struct Connector {
    id: u32,
    addr: SocketAddr,
    load: Load,
    cpu: Option<usize>,
}

impl Connector {
    /// Sets up, reports on `ready`, waits for the common start, runs;
    /// None when the run was called off (another connection failed).
    fn run(
        self,
        ready: Sender<bool>,
        start: Receiver<Instant>,
    ) -> Result<Option<ConnectionRun>, String> {
        let set_up = self.set_up();
        let _ = ready.send(set_up.is_ok());
        drop(ready);
        let client = set_up?;
        let Ok(start) = start.recv() else {
            return Ok(None);
        };
        let until = start + Duration::from_secs_f64(self.load.seconds);
        Ok(Some(client.measure(until, self.load.set_every)))
    }

    /// Pins, connects and stores this connection's keys.
    fn set_up(&self) -> Result<Client, String> {
        if let Some(cpu) = self.cpu {
            host::cpu::pin_current_thread(cpu).map_err(|e| e.to_string())?;
        }
        let mut conn =
            Connection::open(self.addr).map_err(|e| format!("connect to {}: {e}", self.addr))?;
        let keys = self.load.keys_per_connection as usize;
        let values: Vec<Vec<u8>> = (0..keys)
            .map(|i| value_for(self.id, i, 0, self.load.value_bytes))
            .collect();
        for (i, value) in values.iter().enumerate() {
            let key = key_name(self.id, i);
            match conn.set(&key, value) {
                Ok(Reply::Stored) => {}
                Ok(other) => {
                    return Err(format!(
                        "set {key} before the run: the reply {}",
                        describe(&other)
                    ))
                }
                Err(e) => return Err(format!("set {key} before the run: {e}")),
            }
        }
        Ok(Client {
            id: self.id,
            conn,
            writes: vec![0; keys],
            values,
            run: ConnectionRun {
                requests: 0,
                errors: 0,
                latencies_us: Vec::new(),
                verification: Verification::default(),
                ended: Instant::now(),
            },
        })
    }
}

/// A connected client and what it last stored under each of its keys.
struct Client {
    id: u32,
    conn: Connection,
    values: Vec<Vec<u8>>,
    /// Per key, the writes stored since the first.
    writes: Vec<u64>,
    run: ConnectionRun,
}

impl Client {
    fn measure(mut self, until: Instant, set_every: u32) -> ConnectionRun {
        let mut n = 0u64;
        while Instant::now() < until {
            n += 1;
            let is_set = set_every > 0 && n.is_multiple_of(u64::from(set_every));
            match self.request((n % self.values.len() as u64) as usize, is_set) {
                Ok(true) => {}
                // Out of step with the server (the reply is counted
                // already), or an I/O error: this connection cannot go on.
                Ok(false) => break,
                Err(_) => {
                    self.run.errors += 1;
                    break;
                }
            }
        }
        self.run.ended = Instant::now();
        self.run
    }

    /// One timed request on key `i`; false when the reply does not fit
    /// the request (the stream is out of step).
    fn request(&mut self, i: usize, is_set: bool) -> io::Result<bool> {
        let key = key_name(self.id, i);
        let began = Instant::now();
        let (reply, written) = if is_set {
            let value = value_for(self.id, i, self.writes[i] + 1, self.values[i].len());
            (self.conn.set(&key, &value)?, Some(value))
        } else {
            (self.conn.get(&key)?, None)
        };
        self.run
            .latencies_us
            .push(began.elapsed().as_secs_f64() * 1e6);
        self.run.requests += 1;
        Ok(match written {
            Some(value) => self.judge_set(i, value, &reply),
            None => self.judge_get(&key, i, &reply),
        })
    }

    fn judge_set(&mut self, i: usize, value: Vec<u8>, reply: &Reply) -> bool {
        match reply {
            Reply::Stored => {
                self.values[i] = value;
                self.writes[i] += 1;
            }
            _ => self.run.errors += 1,
        }
        !matches!(reply, Reply::Values(_))
    }

    fn judge_get(&mut self, key: &str, i: usize, reply: &Reply) -> bool {
        let found = check_get(key, &self.values[i], self.writes[i], reply);
        self.run.errors += u64::from(found.is_err());
        self.run.verification.record(found);
        !matches!(
            reply,
            Reply::Stored | Reply::NotStored | Reply::Exists | Reply::NotFound
        )
    }
}

/// Whether a GET's reply holds `want`, the value of write `write`.
fn check_get(key: &str, want: &[u8], write: u64, reply: &Reply) -> Result<(), String> {
    let values = match reply {
        Reply::Values(values) => values,
        other => return Err(format!("get {key}: the reply {}", describe(other))),
    };
    match &values[..] {
        [] => Err(format!(
            "get {key}: a miss, after write {write} of {} bytes",
            want.len()
        )),
        [value] if value.key == key => match first_difference(want, &value.data) {
            None => Ok(()),
            Some(at) => Err(format!(
                "get {key}: {} bytes, write {write} stored {}; they differ from byte {at}",
                value.data.len(),
                want.len()
            )),
        },
        _ => Err(format!("get {key}: the reply {}", describe(reply))),
    }
}

/// A reply in a few words (not a value's bytes).
fn describe(reply: &Reply) -> String {
    match reply {
        Reply::Values(values) => {
            let keys: Vec<&str> = values.iter().map(|v| v.key.as_str()).collect();
            format!("VALUE for {keys:?}")
        }
        other => format!("{other:?}"),
    }
}

fn key_name(connection: u32, i: usize) -> String {
    format!("steer:{connection}:{i}")
}

/// The bytes of write `write` to key `i` of `connection`: pseudo-random
/// (SplitMix64, Steele et al. 2014) from the three, so each write differs.
fn value_for(connection: u32, i: usize, write: u64, len: usize) -> Vec<u8> {
    let mut state = (u64::from(connection) << 40) ^ ((i as u64) << 20) ^ write.rotate_left(48);
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    std::iter::repeat_with(|| next().to_le_bytes())
        .flatten()
        .take(len)
        .collect()
}

/// A connection with the bytes read past the last reply.
struct Connection {
    stream: TcpStream,
    pending: Vec<u8>,
}

impl Connection {
    fn open(addr: SocketAddr) -> io::Result<Connection> {
        let stream = connect_when_listening(addr, CONNECT_PATIENCE)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(Connection {
            stream,
            pending: Vec::new(),
        })
    }

    fn set(&mut self, key: &str, value: &[u8]) -> io::Result<Reply> {
        let mut request = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
        self.call(&request)
    }

    fn get(&mut self, key: &str) -> io::Result<Reply> {
        self.call(format!("get {key}\r\n").as_bytes())
    }

    /// Sends one request (in one write) and reads its reply.
    fn call(&mut self, request: &[u8]) -> io::Result<Reply> {
        self.stream.write_all(request)?;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match parse_reply(&self.pending) {
                Ok(Some((reply, used))) => {
                    self.pending.drain(..used);
                    return Ok(reply);
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(ErrorKind::InvalidData, e)),
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(io::Error::new(
                        ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    ))
                }
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;
    use std::process::{Child, Command, Stdio};

    fn parsed(bytes: &[u8]) -> (Reply, usize) {
        parse_reply(bytes).unwrap().expect("a complete reply")
    }

    fn value(key: &str, data: &[u8]) -> Value {
        Value {
            key: key.into(),
            flags: 0,
            data: data.to_vec(),
        }
    }

    #[test]
    fn each_reply_is_read_with_the_bytes_it_took() {
        assert_eq!(parsed(b"STORED\r\nEND\r\n"), (Reply::Stored, 8));
        assert_eq!(parsed(b"NOT_STORED\r\n").0, Reply::NotStored);
        assert_eq!(parsed(b"EXISTS\r\n").0, Reply::Exists);
        assert_eq!(parsed(b"NOT_FOUND\r\n").0, Reply::NotFound);
        assert_eq!(parsed(b"END\r\n"), (Reply::Values(vec![]), 5));
        assert_eq!(parsed(b"ERROR\r\n").0, Reply::Error(String::new()));
        assert_eq!(parsed(b"ERROR bad\r\n").0, Reply::Error("bad".into()));
        let client = parsed(b"CLIENT_ERROR bad data chunk\r\n").0;
        assert_eq!(client, Reply::ClientError("bad data chunk".into()));
        let server = parsed(b"SERVER_ERROR out of memory storing object\r\n").0;
        assert_eq!(
            server,
            Reply::ServerError("out of memory storing object".into())
        );
        assert_eq!(
            parsed(b"CLIENT_ERROR\r\n").0,
            Reply::ClientError(String::new())
        );
    }

    #[test]
    fn values_are_framed_by_their_length_not_by_line_ends() {
        let bytes = b"VALUE a 7 10 99\r\n\r\nEND\r\n\0xy\r\nVALUE b 0 0\r\n\r\nEND\r\nSTORED\r\n";
        let (reply, used) = parsed(bytes);
        let mut a = value("a", b"\r\nEND\r\n\0xy");
        a.flags = 7;
        assert_eq!(reply, Reply::Values(vec![a, value("b", b"")]));
        assert_eq!(&bytes[used..], b"STORED\r\n");
    }

    #[test]
    fn every_prefix_of_a_reply_is_incomplete_never_an_error() {
        let bytes = b"VALUE steer:0:1 0 5\r\nab\r\nc\r\nEND\r\n";
        for end in 0..bytes.len() {
            assert_eq!(parse_reply(&bytes[..end]), Ok(None), "{end}");
        }
        assert_eq!(parsed(bytes).1, bytes.len());
    }

    #[test]
    fn bytes_that_are_no_reply_are_errors() {
        let cases: [(&[u8], ReplyError); 9] = [
            (b"HELLO\r\n", ReplyError::UnknownLine("HELLO".into())),
            (b"STORED\n", ReplyError::BareLineFeed),
            (b"\n", ReplyError::BareLineFeed),
            (
                b"VALUE k 0\r\n",
                ReplyError::BadValueLine("VALUE k 0".into()),
            ),
            (
                b"VALUE k x 1\r\n",
                ReplyError::BadValueLine("VALUE k x 1".into()),
            ),
            (
                b"VALUE k 0 -1\r\n",
                ReplyError::BadValueLine("VALUE k 0 -1".into()),
            ),
            (
                b"VALUE k 0 99999999999\r\n",
                ReplyError::BadValueLine("VALUE k 0 99999999999".into()),
            ),
            (
                b"VALUE k 0 1 c\r\n",
                ReplyError::BadValueLine("VALUE k 0 1 c".into()),
            ),
            (b"VALUE k 0 1\r\nab\r\n", ReplyError::BadDataEnd),
        ];
        for (bytes, error) in cases {
            assert_eq!(parse_reply(bytes), Err(error), "{bytes:?}");
        }
        assert_eq!(
            parse_reply(&[b'S'; MAX_LINE + 2]),
            Err(ReplyError::LineTooLong)
        );
        assert_eq!(parse_reply(&[b'S'; MAX_LINE + 1]), Ok(None));
        let after_value = b"VALUE k 0 1\r\na\r\nSTORED\r\n";
        assert_eq!(
            parse_reply(after_value),
            Err(ReplyError::BadValueLine("STORED".into()))
        );
    }

    #[test]
    fn each_write_of_a_key_has_bytes_of_its_own() {
        let first = value_for(1, 2, 0, 100);
        assert_eq!(first.len(), 100);
        assert_eq!(first, value_for(1, 2, 0, 100));
        for other in [
            value_for(1, 2, 1, 100),
            value_for(1, 3, 0, 100),
            value_for(2, 2, 0, 100),
        ] {
            assert_ne!(first, other);
        }
        assert_eq!(value_for(0, 0, 0, 0), Vec::<u8>::new());
        assert_eq!(key_name(3, 7), "steer:3:7");
    }

    #[test]
    fn a_get_is_checked_against_the_last_write() {
        let want = value_for(0, 0, 4, 20);
        let key = "steer:0:0";
        let reply = |data: &[u8]| Reply::Values(vec![value(key, data)]);
        assert_eq!(check_get(key, &want, 4, &reply(&want)), Ok(()));
        let why = check_get(key, &want, 4, &reply(&want[..5])).unwrap_err();
        assert!(
            why.contains("get steer:0:0: 5 bytes, write 4 stored 20") && why.contains("byte 5"),
            "{why}"
        );
        let miss = check_get(key, &want, 4, &Reply::Values(vec![])).unwrap_err();
        assert!(miss.contains("a miss"), "{miss}");
        let other_key = Reply::Values(vec![value("steer:1:0", &want)]);
        assert!(check_get(key, &want, 4, &other_key)
            .unwrap_err()
            .contains("steer:1:0"));
        let error = check_get(key, &want, 4, &Reply::ServerError("busy".into())).unwrap_err();
        assert!(error.contains("busy"), "{error}");
    }

    fn load(connections: u32, seconds: f64) -> Load {
        Load {
            connections,
            seconds,
            value_bytes: 100,
            set_every: 10,
            keys_per_connection: 8,
        }
    }

    #[test]
    fn a_load_that_cannot_run_is_refused() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 9));
        for bad in [
            load(0, 1.0),
            load(MAX_CONNECTIONS + 1, 1.0),
            load(1, 0.0),
            load(1, f64::NAN),
            load(1, 1e30),
        ] {
            assert!(
                matches!(run(None, addr, &bad, &[]), Err(ExpError::Parameter(_))),
                "{bad:?}"
            );
        }
        let no_keys = Load {
            keys_per_connection: 0,
            ..load(1, 1.0)
        };
        assert!(matches!(
            run(None, addr, &no_keys, &[]),
            Err(ExpError::Parameter(_))
        ));
    }

    /// A server that stores nothing: `set_reply` to every set, the same
    /// 3 bytes to every get.
    fn forgetful_server(set_reply: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || answer_forgetfully(stream, set_reply));
            }
        });
        addr
    }

    fn answer_forgetfully(stream: TcpStream, set_reply: &[u8]) -> io::Result<()> {
        let mut out = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        while reader.read_line(&mut line)? > 0 {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[..] {
                ["set", _, _, _, len] => {
                    let mut data = vec![0; len.parse::<usize>().unwrap_or(0) + 2];
                    reader.read_exact(&mut data)?;
                    out.write_all(set_reply)?;
                }
                ["get", key] => {
                    out.write_all(format!("VALUE {key} 0 3\r\nabc\r\nEND\r\n").as_bytes())?
                }
                _ => out.write_all(b"ERROR\r\n")?,
            }
            line.clear();
        }
        Ok(())
    }

    #[test]
    fn every_wrong_value_is_counted_and_the_first_named() {
        let (run, found) = run(None, forgetful_server(b"STORED\r\n"), &load(2, 0.2), &[]).unwrap();
        assert!(run.requests > 0 && found.checked > 0, "{run:?} {found:?}");
        assert_eq!(found.wrong, found.checked);
        assert_eq!(run.errors, found.wrong, "a wrong value is a failed request");
        let first = found.first_wrong.unwrap();
        assert!(
            first.starts_with("get steer:") && first.contains("3 bytes"),
            "{first}"
        );
        assert!(run.seconds >= 0.2, "{run:?}");
    }

    #[test]
    fn a_connection_that_cannot_store_its_keys_calls_the_run_off() {
        let refusing = forgetful_server(b"SERVER_ERROR object too large for cache\r\n");
        let started = Instant::now();
        match run(None, refusing, &load(3, 30.0), &[]) {
            Err(ExpError::Program { detail, .. }) => {
                assert!(
                    detail.contains("set steer:") && detail.contains("too large"),
                    "{detail}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(10), "it ran anyway");
    }

    /// memcached on a free loopback port, killed when dropped.
    struct Memcached(Child);

    impl Drop for Memcached {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    #[ignore = "needs memcached: make test runs it"]
    fn memcached_returns_what_each_connection_stored_under_load() {
        testkit::require_program("memcached", "make deps installs it");
        let port = testkit::free_port();
        let child = Command::new("memcached")
            .args([
                "-l",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-t",
                "2",
                "-U",
                "0",
                "-u",
                "root",
            ])
            .stdin(Stdio::null())
            .spawn()
            .expect("start memcached");
        let _server = Memcached(child);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        connect_when_listening(addr, CONNECT_PATIENCE).expect("memcached accepts");
        let cpus = host::cpu::allowed_cpus().unwrap_or_default();
        let (run, found) = run(None, addr, &load(4, 1.0), &cpus).unwrap();
        assert!(run.requests > 0 && run.errors == 0, "{run:?} {found:?}");
        assert!(found.passed() && found.checked > 0, "{found:?}");
        let [p50, p99, p999] = [run.p50_us, run.p99_us, run.p999_us].map(Option::unwrap);
        assert!(0.0 < p50 && p50 <= p99 && p99 <= p999, "{run:?}");
        assert!((1.0..2.0).contains(&run.seconds), "{run:?}");
    }
}

//! The HTTP server: routing, the token check, and the sampler thread that
//! keeps the served configs and the load current.
//!
//! Request handlers never touch the kernel: they read the last snapshot the
//! sampler thread wrote. The sampler runs in the served namespace, reads
//! /proc and the software RSS counters every load interval, and re-reads
//! every config source every config interval.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use tiny_http::{Header, Method, Request, Response};

use crate::api::{
    ConfigOrigin, DeviceLoad, DevicesReply, ErrorReply, LoadReply, QueueLoad, RssReply,
    ServedEntry, WhoamiReply, API_VERSION,
};
use crate::error::AgentError;
use crate::load::{user_hz, ProcSample};
use crate::metrics::{self, Counters};
use crate::served::{Snapshot, Sources};
use crate::token::{Rejection, Token};

/// The port `steer agent` listens on by default.
pub const DEFAULT_PORT: u16 = 9477;

/// Where log lines go (stderr by default; tests capture them).
pub type LogFn = Arc<dyn Fn(&str) + Send + Sync>;

/// A log that writes each line to stderr.
pub fn stderr_log() -> LogFn {
    Arc::new(|line: &str| eprintln!("{line}"))
}

/// How to run the agent.
#[derive(Clone)]
pub struct ServerOptions {
    /// Default 127.0.0.1:[`DEFAULT_PORT`]. Any address that is not loopback
    /// needs a token.
    pub listen: SocketAddr,
    pub token: Option<Token>,
    pub sources: Sources,
    /// How often /proc and the queue counters are sampled (default 100 ms).
    pub load_interval: Duration,
    /// How often every config is re-read and compared (default 500 ms).
    pub config_interval: Duration,
    /// Threads answering requests (default 2).
    pub workers: usize,
    pub log: LogFn,
}

impl ServerOptions {
    pub fn new(sources: Sources) -> Self {
        ServerOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)),
            token: None,
            sources,
            load_interval: Duration::from_millis(100),
            config_interval: Duration::from_millis(500),
            workers: 2,
            log: stderr_log(),
        }
    }
}

/// State shared by the sampler and the request handlers.
struct Shared {
    snapshot: RwLock<Snapshot>,
    load: RwLock<LoadReply>,
    counters: Mutex<Counters>,
    token: Option<Token>,
    log: LogFn,
}

/// A running agent. Dropping it stops the server and its threads.
pub struct Agent {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    stop_sampler: Option<mpsc::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
    /// The listening socket tiny_http accepts on, shut down on drop: a
    /// dropped tiny_http server closes it from its own accept thread a
    /// moment later, so without this a new agent on the same port, or a
    /// client, could still meet the old listener after shutdown returned.
    listener: Option<TcpListener>,
}

fn empty_load() -> LoadReply {
    LoadReply {
        api: API_VERSION,
        interval_ms: 0,
        sampled_at_ms: 0,
        cpus: Vec::new(),
        devices: Vec::new(),
    }
}

/// Reads a lock even if a panicking thread poisoned it (the data is a
/// snapshot, always whole).
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl Agent {
    /// Checks the options, reads every source once (a listed device or a
    /// file that gives no config is an error), binds the listener in the
    /// served namespace and starts serving.
    pub fn start(opts: ServerOptions) -> Result<Agent, AgentError> {
        if opts.token.is_none() && !opts.listen.ip().is_loopback() {
            return Err(AgentError::TokenRequired { addr: opts.listen });
        }
        if opts.load_interval.is_zero() || opts.config_interval.is_zero() || opts.workers == 0 {
            return Err(AgentError::InvalidOption(
                "intervals and the worker count must be positive".into(),
            ));
        }
        let netns = opts.sources.netns.clone();
        let sources = opts.sources.clone();
        let readings = host::netns::run_in(netns.as_deref(), move || sources.read(true))??;
        let mut snapshot = Snapshot::default();
        snapshot.update(readings);

        let listen = opts.listen;
        let listener = host::netns::run_in(netns.as_deref(), move || {
            TcpListener::bind(listen).map_err(|source| AgentError::Listen {
                addr: listen,
                source,
            })
        })??;
        let addr = listener.local_addr().map_err(|source| AgentError::Listen {
            addr: listen,
            source,
        })?;
        let own_listener = listener.try_clone().map_err(|source| AgentError::Listen {
            addr: listen,
            source,
        })?;
        let server =
            tiny_http::Server::from_listener(listener, None).map_err(|e| AgentError::Listen {
                addr,
                source: std::io::Error::other(e.to_string()),
            })?;
        let server = Arc::new(server);

        let mut counters = Counters::default();
        for r in [Rejection::Missing, Rejection::Malformed, Rejection::Wrong] {
            counters.rejected.insert(r.reason(), 0);
        }
        let shared = Arc::new(Shared {
            snapshot: RwLock::new(snapshot),
            load: RwLock::new(empty_load()),
            counters: Mutex::new(counters),
            token: opts.token.clone(),
            log: opts.log.clone(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (stop_tx, stop_rx) = mpsc::channel();
        let mut threads = Vec::new();
        {
            let shared = shared.clone();
            let opts = opts.clone();
            let spawned = std::thread::Builder::new()
                .name("agent-sampler".into())
                .spawn(move || {
                    if let Some(ns) = opts.sources.netns.as_deref() {
                        if let Err(e) = host::netns::enter(ns) {
                            (shared.log)(&format!("steer agent: sampler: {e}"));
                            return;
                        }
                    }
                    sample_loop(&shared, &opts, &stop_rx);
                });
            threads.push(spawned.map_err(|e| AgentError::Io {
                what: "spawn the sampler thread".into(),
                source: e,
            })?);
        }
        for i in 0..opts.workers {
            let (server, shared, stop) = (server.clone(), shared.clone(), stop.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("agent-http-{i}"))
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match server.recv_timeout(Duration::from_millis(100)) {
                            Ok(Some(rq)) => handle(&shared, rq),
                            Ok(None) => {}
                            Err(e) => {
                                (shared.log)(&format!("steer agent: accept: {e}"));
                                std::thread::sleep(Duration::from_millis(100));
                            }
                        }
                    }
                });
            threads.push(spawned.map_err(|e| AgentError::Io {
                what: "spawn a server thread".into(),
                source: e,
            })?);
        }
        Ok(Agent {
            addr,
            shared,
            stop,
            stop_sampler: Some(stop_tx),
            threads,
            listener: Some(own_listener),
        })
    }

    /// The address the server listens on (with the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR:PORT`, for [`crate::AgentClient::new`].
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What is served now (as `GET /v1/devices` shows it).
    pub fn devices(&self) -> Vec<ServedEntry> {
        read(&self.shared.snapshot)
            .entries
            .iter()
            .map(|e| e.describe())
            .collect()
    }

    /// Blocks until the agent stops (it stops only when dropped elsewhere,
    /// so for the CLI: forever).
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Stops serving and joins the threads.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.stop_sampler.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // shutdown(2) on a listening TCP socket stops it listening at once
        // (inet_shutdown -> tcp_disconnect): connects are refused from here
        // on, and tiny_http's accept thread wakes up and sees its close flag.
        if let Some(listener) = self.listener.take() {
            let _ = nix::sys::socket::shutdown(
                std::os::fd::AsRawFd::as_raw_fd(&listener),
                nix::sys::socket::Shutdown::Read,
            );
        }
    }
}

/// Samples /proc every load interval and re-reads the configs every config
/// interval, until the stop channel closes.
fn sample_loop(shared: &Shared, opts: &ServerOptions, stop: &mpsc::Receiver<()>) {
    let started = Instant::now();
    let hz = user_hz();
    let netns = opts.sources.netns.as_deref();
    let mut prev: Option<(Instant, ProcSample)> = None;
    let mut prev_queues: BTreeMap<(String, u32), u64> = BTreeMap::new();
    let mut next_config = Instant::now() + opts.config_interval;
    let mut reported: Option<String> = None;
    let mut report_once = |msg: String| {
        if reported.as_ref() != Some(&msg) {
            (shared.log)(&format!("steer agent: {msg}"));
            reported = Some(msg);
        }
    };
    loop {
        let now = Instant::now();
        // Load.
        let mut load = empty_load();
        load.sampled_at_ms = now.duration_since(started).as_millis() as u64;
        match ProcSample::read() {
            Ok(cur) => {
                let earlier = prev.as_ref().map(|(t, p)| (p, now.duration_since(*t)));
                load.interval_ms = earlier.map_or(0, |(_, dt)| dt.as_millis() as u64);
                load.cpus = cur.rates(earlier, hz);
                prev = Some((now, cur));
            }
            Err(e) => report_once(format!("load: {e}")),
        }
        let soft: Vec<String> = read(&shared.snapshot)
            .entries
            .iter()
            .filter(|e| matches!(e.config, Ok((ConfigOrigin::SoftwareRss, _))))
            .filter_map(|e| e.dev.clone())
            .collect();
        let secs = load.interval_ms as f64 / 1000.0;
        for dev in soft {
            match nic::stats(&dev, netns) {
                Ok(stats) => {
                    let queues = stats
                        .queues
                        .iter()
                        .map(|q| {
                            let key = (dev.clone(), q.queue);
                            let before = prev_queues.insert(key, q.packets);
                            // A rate needs an earlier count of this queue
                            // and an interval (absent, not 0, without).
                            let delta = before.and_then(|b| q.packets.checked_sub(b));
                            QueueLoad {
                                queue: q.queue,
                                cpu: q.cpu,
                                packets: q.packets,
                                packets_per_sec: delta
                                    .filter(|_| secs > 0.0)
                                    .map(|d| d as f64 / secs),
                            }
                        })
                        .collect();
                    load.devices.push(DeviceLoad {
                        dev: dev.clone(),
                        queues,
                    });
                }
                Err(e) => report_once(format!("queue counters of {dev}: {e}")),
            }
        }
        *write(&shared.load) = load;
        // Configs.
        if now >= next_config {
            next_config = now + opts.config_interval;
            match opts.sources.read(false) {
                Ok(readings) => {
                    let changes = write(&shared.snapshot).update(readings);
                    for c in changes {
                        (shared.log)(&format!("steer agent: {c}"));
                    }
                }
                Err(e) => report_once(format!("reading configs: {e}")),
            }
        }
        match stop.recv_timeout(opts.load_interval) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
}

/// An answer: status, content type, body.
struct Reply {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
}

fn json<T: Serialize>(status: u16, value: &T) -> Reply {
    Reply {
        status,
        content_type: "application/json",
        body: serde_json::to_vec_pretty(value).unwrap_or_else(|e| e.to_string().into_bytes()),
    }
}

fn error(status: u16, code: &str, message: impl Into<String>) -> Reply {
    json(
        status,
        &ErrorReply {
            api: API_VERSION,
            code: code.to_string(),
            error: message.into(),
        },
    )
}

/// The label a path is counted under.
fn path_label(path: &str) -> &'static str {
    match path {
        "/v1/rss" => "/v1/rss",
        "/v1/load" => "/v1/load",
        "/v1/whoami" => "/v1/whoami",
        "/v1/devices" => "/v1/devices",
        "/metrics" => "/metrics",
        _ => "other",
    }
}

/// `%XX` escapes and `+` decoded; None for a bad escape.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The query's `key=value` pairs.
fn parse_query(query: &str) -> Option<Vec<(String, String)>> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((percent_decode(k)?, percent_decode(v)?))
        })
        .collect()
}

fn handle(shared: &Shared, rq: Request) {
    let remote = rq.remote_addr().copied();
    let url = rq.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let label = path_label(path);
    {
        let mut c = shared
            .counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *c.requests.entry(label).or_insert(0) += 1;
    }
    let reply = if let Err(rejection) = authorize(shared, &rq) {
        {
            let mut c = shared
                .counters
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *c.rejected.entry(rejection.reason()).or_insert(0) += 1;
        }
        // The path only (a confused client could put anything in the query).
        (shared.log)(&format!(
            "steer agent: rejected {} {} {}: {}",
            remote.map_or("unknown".to_string(), |a| a.to_string()),
            rq.method(),
            path.chars().take(200).collect::<String>(),
            rejection.reason()
        ));
        error(
            401,
            "unauthorized",
            "this agent needs 'Authorization: Bearer TOKEN'",
        )
    } else if !matches!(rq.method(), Method::Get | Method::Head) {
        error(405, "method_not_allowed", "only GET is served")
    } else {
        route(shared, path, query, remote)
    };
    respond(rq, reply);
}

fn authorize(shared: &Shared, rq: &Request) -> Result<(), Rejection> {
    let Some(token) = &shared.token else {
        return Ok(());
    };
    let header = rq
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.as_str());
    token.check(header)
}

fn respond(rq: Request, reply: Reply) {
    let mut response = Response::new(
        reply.status.into(),
        Vec::new(),
        Cursor::new(reply.body.clone()),
        Some(reply.body.len()),
        None,
    );
    if let Ok(h) = Header::from_bytes("Content-Type", reply.content_type) {
        response.add_header(h);
    }
    if reply.status == 401 {
        if let Ok(h) = Header::from_bytes("WWW-Authenticate", "Bearer") {
            response.add_header(h);
        }
    }
    // The client may be gone; nothing to do about it.
    let _ = rq.respond(response);
}

fn route(shared: &Shared, path: &str, query: &str, remote: Option<SocketAddr>) -> Reply {
    let Some(params) = parse_query(query) else {
        return error(400, "bad_request", "malformed query string");
    };
    match path {
        "/v1/rss" => rss(shared, &params),
        "/v1/load" => json(200, &*read(&shared.load)),
        "/v1/whoami" => match remote {
            Some(a) => json(
                200,
                &WhoamiReply {
                    api: API_VERSION,
                    addr: a.ip().to_canonical(),
                    port: a.port(),
                },
            ),
            None => error(500, "no_peer", "the connection has no peer address"),
        },
        "/v1/devices" => json(
            200,
            &DevicesReply {
                api: API_VERSION,
                devices: read(&shared.snapshot)
                    .entries
                    .iter()
                    .map(|e| e.describe())
                    .collect(),
            },
        ),
        "/metrics" => {
            let counters = shared
                .counters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let text = metrics::render(&read(&shared.snapshot), &read(&shared.load), &counters);
            Reply {
                status: 200,
                content_type: "text/plain; version=0.0.4",
                body: text.into_bytes(),
            }
        }
        _ => error(
            404,
            "not_found",
            format!(
                "no such endpoint '{}' (API version {API_VERSION}: /v1/rss, /v1/load, /v1/whoami, /v1/devices, /metrics)",
                path.chars().take(100).collect::<String>()
            ),
        ),
    }
}

fn rss(shared: &Shared, params: &[(String, String)]) -> Reply {
    let get = |k: &str| {
        params
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let snapshot = read(&shared.snapshot);
    let (entry, addr) = match (get("addr"), get("dev")) {
        (Some(a), None) => {
            let Ok(ip) = a.parse::<IpAddr>() else {
                return error(400, "bad_request", format!("'{a}' is not an IP address"));
            };
            match snapshot.by_addr(ip) {
                Some(e) => (e, Some(ip.to_canonical())),
                None => {
                    return error(
                        404,
                        "unknown_addr",
                        format!("no served interface carries {ip} (see /v1/devices)"),
                    )
                }
            }
        }
        (None, Some(d)) => match snapshot.by_dev(d) {
            Some(e) => (e, None),
            None => {
                return error(
                    404,
                    "unknown_dev",
                    format!("no served device named '{d}' (see /v1/devices)"),
                )
            }
        },
        _ => {
            return error(
                400,
                "bad_request",
                "give exactly one of ?addr=IP or ?dev=DEV",
            )
        }
    };
    match &entry.config {
        Ok((origin, config)) => json(
            200,
            &RssReply {
                api: API_VERSION,
                dev: entry.dev.clone(),
                addr,
                addrs: entry.addrs.clone(),
                origin: *origin,
                config_version: entry.version,
                config: config.clone(),
            },
        ),
        Err(reason) => error(503, "no_config", reason.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_decoding() {
        assert_eq!(
            parse_query("addr=fd77%3A1%3A%3A2&x=").unwrap(),
            vec![
                ("addr".to_string(), "fd77:1::2".to_string()),
                ("x".to_string(), String::new())
            ]
        );
        assert!(parse_query("addr=%zz").is_none());
        assert!(parse_query("addr=%4").is_none());
        assert_eq!(parse_query("").unwrap(), vec![]);
    }

    #[test]
    fn path_labels_are_bounded() {
        assert_eq!(path_label("/v1/rss"), "/v1/rss");
        assert_eq!(path_label("/v1/../etc"), "other");
    }
}

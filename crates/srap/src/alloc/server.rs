//! The allocator: decisions ([`Allocator`]) and the Unix socket server
//! ([`Server`]) around them.
//!
//! A lease picks, for its (local, remote, remote port), the CPU with the
//! fewest flows (live leases plus connections that already exist to the
//! same destination), then a free port that lands there. One mutex
//! serializes decisions, so racing clients never get the same port and, while
//! cores remain, never the same CPU. A lease ends with `release`, or when no
//! socket with its 4-tuple exists any more once the grace period after the
//! lease has passed (so a connect still in progress is not released).
//!
//! With a lease table ([`super::table`], made by [`Server::bind`]) the
//! allocator also plans ports ahead per destination into shared memory;
//! a claimed slot becomes a lease like any other, and a lease request first
//! takes its destination's offers back, so both paths share one plan.

use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rss::{L4Proto, RssConfig};

use super::leases::{Lease, Leases};
use super::protocol::{
    parse_request, to_line, BatchLease, BatchResponse, ErrorCode, LeaseInfo, LeaseResponse,
    LeasedFlow, OkResponse, Refusal, Request, StatusResponse, MAX_BATCH, MAX_LINE, VERSION,
};
use super::table::{
    self, Book, Mapping, Offer, RegionKey, TableStats, LT_HEARTBEAT_MS, LT_SLOTS, LT_WAKE_SLOT,
};
use super::{source_address_for, AllocError};
use crate::error::SrapError;
use crate::plan::{plan, PlanOptions};
use crate::ports::LocalPorts;
use crate::predict::PortPredictor;

/// Predictors kept per (proto, local, remote, remote port) before the cache
/// is emptied.
const PREDICTOR_CACHE: usize = 4096;

/// How long the host's ports and sockets, once read, are used.
const HOST_TTL: Duration = Duration::from_millis(1000);
/// How often the background thread re-reads the host's ports, so a lease
/// never waits for the slow /proc walk (a few ms, far more under load: a
/// request that waits past the client's 200 ms deadline costs a steered flow).
const HOST_REFRESH: Duration = Duration::from_millis(200);

/// TCP states that are not a connection (include/net/tcp_states.h).
const TCP_TIME_WAIT: u8 = 6;
const TCP_CLOSE: u8 = 7;
const TCP_LISTEN: u8 = 10;

type PredictorKey = (L4Proto, IpAddr, IpAddr, u16);

/// A connection's (local, remote) addresses and ports.
type Tuple = (SocketAddr, SocketAddr);

/// Where the allocator gets a receiver's config it was not given (e.g. the
/// receiver's agent, `steer ports serve --agent URL`). Called without the
/// allocator's lock held; the answer is cached for the allocator's
/// `config_ttl` and fetched again once it is older.
pub trait ConfigSource: Send + Sync {
    /// The config serving `remote`, or a one-line reason.
    fn fetch(&self, remote: IpAddr) -> Result<RssConfig, String>;
}

#[derive(Default)]
struct State {
    configs: HashMap<IpAddr, RssConfig>,
    /// When each config from the [`ConfigSource`] was fetched (configs
    /// given with `set_config` are not listed and never go stale).
    fetched: HashMap<IpAddr, Instant>,
    predictors: HashMap<PredictorKey, PortPredictor>,
    leases: Leases,
    next_id: u64,
    /// The shared-memory lease table, when the server made one.
    table: Option<Book>,
    table_stats: TableStats,
}

/// A region nobody claimed from or leased for in this long is emptied
/// (its offered ports go back to the pool).
const REGION_IDLE: Duration = Duration::from_secs(10);

/// The connections of a [`LocalPorts`] read (not listening, closed or in
/// TIME-WAIT), as canonical (local, remote) tuples.
fn connections_of(ports: &LocalPorts) -> impl Iterator<Item = Tuple> + '_ {
    ports
        .sockets
        .iter()
        .filter(|s| !matches!(s.state, TCP_TIME_WAIT | TCP_CLOSE | TCP_LISTEN))
        .map(|s| (canonical(s.local), canonical(s.remote)))
}

/// One read of the host's ports, with its connections grouped by (local,
/// remote) address once per read rather than filtered on every lease
/// (a busy host has many thousands).
struct HostSnapshot {
    /// When the read began.
    read_at: Instant,
    ports: LocalPorts,
    connections: HashMap<(IpAddr, IpAddr), Vec<Tuple>>,
}

impl HostSnapshot {
    fn read(proc_root: &Path, proto: L4Proto) -> Result<Self, SrapError> {
        let read_at = Instant::now();
        let ports = LocalPorts::read_from(proc_root, proto)?;
        let mut connections: HashMap<_, Vec<_>> = HashMap::new();
        for (l, r) in connections_of(&ports) {
            connections
                .entry((l.ip(), r.ip()))
                .or_default()
                .push((l, r));
        }
        Ok(HostSnapshot {
            read_at,
            ports,
            connections,
        })
    }
}

/// The allocator's decisions, without a socket.
pub struct Allocator {
    state: Mutex<State>,
    /// The host's port policy and sockets per protocol, and when they were
    /// read: reading /proc/net/tcp walks the kernel's whole established
    /// hash table (milliseconds with 256k buckets), too slow per lease.
    host: Mutex<HashMap<L4Proto, Arc<HostSnapshot>>>,
    proc_root: PathBuf,
    grace: Duration,
    source: Option<Box<dyn ConfigSource>>,
    config_ttl: Duration,
    /// The sock_diag socket for exact lookups, opened on first use.
    diag: Mutex<Option<rss::live::SockDiag>>,
    /// The lease table's mapping, for the heartbeat and the claim futex
    /// (its slots are written only through `State::table`, under the lock).
    table: Option<Arc<Mapping>>,
}

/// IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`) as plain IPv4.
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

fn refuse(err: SrapError) -> Refusal {
    let code = match &err {
        SrapError::Exhausted { .. } => ErrorCode::Exhausted,
        SrapError::Read { .. } | SrapError::Parse { .. } => ErrorCode::Internal,
        _ => ErrorCode::NotSteerable,
    };
    Refusal::new(code, err.to_string())
}

impl Allocator {
    /// `proc_root` is where ports in use are read (`/proc`); `grace` how
    /// long a lease lives without a matching socket.
    pub fn new(proc_root: impl Into<PathBuf>, grace: Duration) -> Self {
        Allocator {
            state: Mutex::new(State {
                next_id: 1,
                ..State::default()
            }),
            host: Mutex::new(HashMap::new()),
            proc_root: proc_root.into(),
            grace,
            source: None,
            config_ttl: Duration::from_secs(10),
            diag: Mutex::new(None),
            table: None,
        }
    }

    /// Plans ports ahead into the shared-memory table `map`, which shims
    /// claim from without a round trip.
    pub fn with_table(mut self, map: Mapping) -> Self {
        let map = Arc::new(map);
        self.state
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .table = Some(Book::new(map.clone()));
        self.table = Some(map);
        self
    }

    /// What happened to the lease table so far (`None` without one).
    pub fn table_stats(&self) -> Option<TableStats> {
        let state = self.state();
        state.table.as_ref().map(|_| state.table_stats)
    }

    /// Lease ids and 4-tuples to check, and connections made without the
    /// allocator, from `local` to `remote` in the host snapshot: the flows
    /// this sender already has at the receiver, as far as the snapshot
    /// (at most [`HOST_REFRESH`] old) knows.
    fn flows_to_check(
        &self,
        proto: L4Proto,
        host: &HostSnapshot,
        local: IpAddr,
        remote: IpAddr,
    ) -> (Vec<(u64, Tuple)>, Vec<Tuple>) {
        let snapshot: &[Tuple] = host
            .connections
            .get(&(local, remote))
            .map_or(&[], Vec::as_slice);
        let state = self.state();
        let leases = &state.leases;
        // Leases not seen connected yet are counted without a check: the
        // connect may still be on its way (the grace period covers it). A
        // snapshot older than the lease may show an earlier connection on
        // the same 4-tuple, which says nothing about this one.
        let connected = leases
            .pair(local, remote)
            .into_iter()
            .flat_map(|flows| flows.connected.iter())
            .filter_map(|&id| Some((id, leases.get(id)?)));
        let seen = snapshot
            .iter()
            .filter_map(|t| leases.on_port(t.0.port()).filter(|(_, l)| l.tuple() == *t))
            .filter(|(_, l)| host.read_at > l.granted && !l.connected);
        let to_check = connected
            .chain(seen)
            .filter(|(_, l)| (l.flow.proto, l.flow.local, l.flow.remote) == (proto, local, remote))
            .map(|(id, l)| (id, l.tuple()))
            .collect();
        let offered = state.table.as_ref().map(Book::offered);
        let others = snapshot
            .iter()
            .filter(|(l, _)| !leases.ports().contains(l.port()))
            .filter(|(l, _)| !offered.is_some_and(|o| o.contains(l.port())))
            .copied()
            .collect();
        (to_check, others)
    }

    /// Which of `tuples` are live connections now: exact sock_diag lookups
    /// for TCP (a hash lookup each, so a lease never waits for a walk of
    /// the kernel's established hash); everything the snapshot listed when
    /// the kernel cannot be asked (UDP, no sock_diag).
    fn alive(&self, proto: L4Proto, tuples: &[(SocketAddr, SocketAddr)]) -> Vec<bool> {
        if proto == L4Proto::Tcp && !tuples.is_empty() {
            let mut diag = self.diag.lock().unwrap_or_else(|e| e.into_inner());
            if diag.is_none() {
                *diag = rss::live::SockDiag::open().ok();
            }
            if let Some(found) = diag.as_mut().and_then(|d| d.connected(tuples).ok()) {
                return found;
            }
        }
        vec![true; tuples.len()]
    }

    /// The connections from `local` to `remote` made without the allocator
    /// that are alive now, after marking checked leases connected and
    /// releasing those whose connection has closed (so a transfer that
    /// starts right after another is not balanced around flows that just
    /// ended).
    fn connections_now(
        &self,
        proto: L4Proto,
        host: &HostSnapshot,
        local: IpAddr,
        remote: IpAddr,
    ) -> Vec<(SocketAddr, SocketAddr)> {
        let (leases, others) = self.flows_to_check(proto, host, local, remote);
        let tuples: Vec<_> = leases
            .iter()
            .map(|&(_, t)| t)
            .chain(others.iter().copied())
            .collect();
        let alive = self.alive(proto, &tuples);
        let (lease_alive, other_alive) = alive.split_at(leases.len());
        let mut state = self.state();
        for (&(id, _), &up) in leases.iter().zip(lease_alive) {
            if up {
                state.leases.mark_connected(id);
            } else {
                state.leases.remove(id);
            }
        }
        others
            .into_iter()
            .zip(other_alive)
            .filter_map(|(t, &up)| up.then_some(t))
            .collect()
    }

    /// Re-reads the host's ports for TCP (and UDP when leased), off the
    /// request path.
    pub fn refresh_host_ports(&self) {
        for proto in [L4Proto::Tcp, L4Proto::Udp] {
            let known = proto == L4Proto::Tcp
                || self
                    .host
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains_key(&proto);
            if !known {
                continue;
            }
            if let Ok(snapshot) = HostSnapshot::read(&self.proc_root, proto) {
                self.host
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(proto, Arc::new(snapshot));
            }
        }
    }

    /// The host's ports and connections, read at most [`HOST_TTL`] ago.
    fn host_ports(&self, proto: L4Proto) -> Result<Arc<HostSnapshot>, SrapError> {
        let cached = self
            .host
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&proto)
            .filter(|snapshot| snapshot.read_at.elapsed() < HOST_TTL)
            .cloned();
        if let Some(cached) = cached {
            return Ok(cached);
        }
        let snapshot = Arc::new(HostSnapshot::read(&self.proc_root, proto)?);
        self.host
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(proto, snapshot.clone());
        Ok(snapshot)
    }

    /// Fetch configs of remotes without one from `source`, and again once
    /// a fetched one is older than `ttl`.
    pub fn with_config_source(mut self, source: Box<dyn ConfigSource>, ttl: Duration) -> Self {
        self.source = Some(source);
        self.config_ttl = ttl;
        self
    }

    /// Fetches `remote`'s config when there is a source and the cached one
    /// is missing or stale. A failed re-fetch keeps the old config; a failed
    /// first fetch is the refusal.
    fn refresh_config(&self, remote: IpAddr) -> Result<(), Refusal> {
        let Some(source) = &self.source else {
            return Ok(());
        };
        let (has, stale) = {
            let state = self.state();
            let has = state.configs.contains_key(&remote);
            let stale = match state.fetched.get(&remote) {
                Some(at) => at.elapsed() >= self.config_ttl,
                // Given with set_config: never stale.
                None => !has,
            };
            (has, stale)
        };
        if !stale {
            return Ok(());
        }
        match source.fetch(remote) {
            Ok(config) => {
                config.validate().map_err(|e| {
                    Refusal::new(ErrorCode::NoConfig, format!("config for {remote}: {e}"))
                })?;
                let mut state = self.state();
                if state.configs.get(&remote) != Some(&config) {
                    state.predictors.retain(|key, _| key.2 != remote);
                    state.configs.insert(remote, config);
                }
                state.fetched.insert(remote, Instant::now());
                Ok(())
            }
            Err(_) if has => {
                // Keep serving the last config; try again next time.
                Ok(())
            }
            Err(reason) => Err(Refusal::new(
                ErrorCode::NoConfig,
                format!("no RSS config for remote {remote}: {reason}"),
            )),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers (or replaces) the receiver config for `remote`.
    pub fn set_config(&self, remote: IpAddr, config: RssConfig) -> Result<(), Refusal> {
        config
            .validate()
            .map_err(|e| Refusal::new(ErrorCode::BadRequest, format!("config: {e}")))?;
        let remote = remote.to_canonical();
        let mut state = self.state();
        state.predictors.retain(|key, _| key.2 != remote);
        state.configs.insert(remote, config);
        state.fetched.remove(&remote);
        Ok(())
    }

    /// Grants a source port for a new flow from `local` (or the routed
    /// source address) to `remote:remote_port`.
    pub fn lease(
        &self,
        proto: L4Proto,
        local: Option<IpAddr>,
        remote: IpAddr,
        remote_port: u16,
    ) -> Result<LeaseResponse, Refusal> {
        let mut batch = self.lease_batch(proto, local, remote, remote_port, 1)?;
        batch
            .pop()
            .ok_or_else(|| Refusal::new(ErrorCode::Exhausted, "no port planned"))
    }

    /// Grants `count` source ports at once (1..=[`MAX_BATCH`]) for flows
    /// from `local` to `remote:remote_port`, planned together: distinct
    /// CPUs first, then distinct queues, counting live leases and
    /// connections to the same destination. Every port is a lease of its
    /// own (released, or swept once its grace period passes without a
    /// socket), so a client may keep spares for its next connects.
    pub fn lease_batch(
        &self,
        proto: L4Proto,
        local: Option<IpAddr>,
        remote: IpAddr,
        remote_port: u16,
        count: usize,
    ) -> Result<Vec<LeaseResponse>, Refusal> {
        if count == 0 || count > MAX_BATCH {
            return Err(Refusal::new(
                ErrorCode::BadRequest,
                format!("count is 1..={MAX_BATCH}"),
            ));
        }
        let remote = remote.to_canonical();
        let local = match local {
            Some(l) => l.to_canonical(),
            None => source_address_for(SocketAddr::new(remote, remote_port))
                .map_err(|e| {
                    Refusal::new(
                        ErrorCode::Internal,
                        format!("no route to {remote} to pick a local address: {e}"),
                    )
                })?
                .to_canonical(),
        };
        if !matches!(proto, L4Proto::Tcp | L4Proto::Udp) {
            return Err(Refusal::new(ErrorCode::BadRequest, "proto is tcp or udp"));
        }
        self.refresh_config(remote)?;
        let host = self.host_ports(proto).map_err(refuse)?;
        let connections = self.connections_now(proto, &host, local, remote);
        let mut state = self.state();
        let key = (proto, local, remote, remote_port);
        ensure_predictor(&mut state, key)?;
        // This destination's offers in the table are taken back first, so
        // no shim claims one while this plan is made; claims made so far
        // become leases and count in it.
        let region = table::serves(proto)
            .then(|| Self::claim_region(&mut state, key))
            .flatten();
        if state.table.is_some() {
            state.table_stats.round_trips += 1;
        }
        let planned = plan_locked(&state, key, &host, &connections, count)?;
        let now = Instant::now();
        let mut out = Vec::with_capacity(planned.len());
        for entry in planned {
            let id = grant(&mut state, key, entry.port, entry.queue, entry.cpu, now);
            out.push(LeaseResponse {
                v: VERSION,
                port: entry.port,
                queue: entry.queue,
                cpu: entry.cpu,
                lease: id,
            });
        }
        if let Some(region) = region {
            refill(&mut state, region, key, &host, &connections, true);
        }
        Ok(out)
    }

    /// The table region of `key` (assigned if needed), emptied, with its
    /// claims turned into leases. `None` without a table.
    fn claim_region(state: &mut State, key: PredictorKey) -> Option<usize> {
        let (proto, local, remote, remote_port) = key;
        let rkey = RegionKey {
            local,
            remote,
            remote_port,
        };
        let State {
            table: book,
            table_stats,
            ..
        } = state;
        let book = book.as_mut()?;
        // Claims in every region count (they may be to the same receiver).
        let mut claims = book.collect_claims(table_stats);
        let (region, evicted) = book.assign(rkey, table_stats);
        claims.extend(evicted);
        claims.extend(book.take_back(region, table_stats));
        absorb(state, proto, claims);
        Some(region)
    }

    /// Keeps the table current (the server's table thread, after a claim and
    /// every [`LT_HEARTBEAT_MS`]): claims become leases; a region with fewer
    /// than [`LT_WAKE_SLOT`] offers left, or planned more than [`HOST_REFRESH`]
    /// ago, is emptied and planned again with the flows as they are now
    /// (until then shims take its offers in plan order, as from one batch);
    /// regions idle for [`REGION_IDLE`] are emptied and given up.
    pub fn tend_table(&self) {
        // Claims become leases under the same lock that collects them: a
        // collected port is no longer offered, so it must be leased before
        // any plan can see it.
        let due = {
            let mut state = self.state();
            let claims = {
                let State {
                    table: book,
                    table_stats,
                    ..
                } = &mut *state;
                let Some(book) = book.as_mut() else {
                    return;
                };
                let mut claims = book.expire(REGION_IDLE, table_stats);
                claims.extend(book.collect_claims(table_stats));
                claims
            };
            absorb(&mut state, L4Proto::Tcp, claims);
            state
                .table
                .as_ref()
                .map(|b| b.due(HOST_REFRESH, LT_WAKE_SLOT))
                .unwrap_or_default()
        };
        for rkey in due {
            let Ok(host) = self.host_ports(L4Proto::Tcp) else {
                return;
            };
            let connections = self.connections_now(L4Proto::Tcp, &host, rkey.local, rkey.remote);
            let key = (L4Proto::Tcp, rkey.local, rkey.remote, rkey.remote_port);
            let mut state = self.state();
            let Some(region) = state.table.as_ref().and_then(|b| b.region_of(&rkey)) else {
                continue;
            };
            let claims = {
                let State {
                    table: book,
                    table_stats,
                    ..
                } = &mut *state;
                match book.as_mut() {
                    Some(book) => book.take_back(region, table_stats),
                    None => continue,
                }
            };
            let claimed = !claims.is_empty();
            absorb(&mut state, L4Proto::Tcp, claims);
            if ensure_predictor(&mut state, key).is_ok() {
                refill(&mut state, region, key, &host, &connections, claimed);
            }
        }
    }

    /// Heartbeats the table and sleeps until a claim (or
    /// [`LT_HEARTBEAT_MS`]); `seen` is the claim count last handled.
    /// Returns the new count, `None` without a table.
    pub fn wait_for_claims(&self, seen: u32) -> Option<u32> {
        let map = self.table.as_ref()?;
        map.heartbeat();
        map.wait_claims(seen, Duration::from_millis(LT_HEARTBEAT_MS));
        Some(map.claims())
    }

    /// Empties the table and marks it dead (the server is stopping).
    pub fn retire_table(&self) {
        let mut state = self.state();
        let State {
            table: book,
            table_stats,
            ..
        } = &mut *state;
        let claims = book
            .as_mut()
            .map(|b| b.retire(table_stats))
            .unwrap_or_default();
        absorb(&mut state, L4Proto::Tcp, claims);
    }

    /// Ends a lease.
    pub fn release(&self, lease: u64) -> Result<(), Refusal> {
        let mut state = self.state();
        match state.leases.remove(lease) {
            Some(_) => Ok(()),
            None => Err(Refusal::new(
                ErrorCode::UnknownLease,
                format!("no lease {lease} (released already, or its connection closed)"),
            )),
        }
    }

    /// Live leases and the remotes with a config.
    pub fn status(&self) -> StatusResponse {
        let state = self.state();
        let mut remotes: Vec<IpAddr> = state.configs.keys().copied().collect();
        remotes.sort();
        StatusResponse {
            v: VERSION,
            leases: state
                .leases
                .iter()
                .map(|(id, l)| LeaseInfo {
                    lease: id,
                    flow: l.flow,
                    age_ms: l.granted.elapsed().as_millis() as u64,
                    connected: l.connected,
                })
                .collect(),
            remotes,
        }
    }

    /// True when some lease is past its grace period, so [`Self::sweep`]
    /// has something to check.
    pub fn needs_sweep(&self) -> bool {
        let now = Instant::now();
        self.state()
            .leases
            .iter()
            .any(|(_, l)| now.duration_since(l.granted) >= self.grace)
    }

    /// Releases every lease past its grace period whose 4-tuple is not in
    /// `live` (local, remote) for its protocol. Returns how many were released.
    pub fn sweep(&self, live: &HashMap<L4Proto, HashSet<(SocketAddr, SocketAddr)>>) -> usize {
        let now = Instant::now();
        let mut state = self.state();
        let (mut seen, mut gone) = (Vec::new(), Vec::new());
        for (id, lease) in state.leases.iter() {
            let Some(sockets) = live.get(&lease.flow.proto) else {
                continue;
            };
            if sockets.contains(&lease.tuple()) {
                seen.push(id);
            } else if lease.connected || now.duration_since(lease.granted) >= self.grace {
                // A connection that was seen and is gone has closed: free its
                // queue at once, or the next transfer is balanced around
                // flows that no longer exist. The grace period is only for
                // connects still in progress.
                gone.push(id);
            }
        }
        for id in seen {
            state.leases.mark_connected(id);
        }
        for &id in &gone {
            state.leases.remove(id);
        }
        gone.len()
    }

    /// Reads the live sockets of each protocol with a lease and sweeps.
    /// TCP from sock_diag (`rss::live::tcp_sockets`), falling back to
    /// `/proc/net/tcp*`; UDP from `/proc/net/udp*`. A protocol whose
    /// sockets cannot be read is left alone.
    pub fn sweep_now(&self) -> usize {
        if !self.needs_sweep() {
            return 0;
        }
        let protos: HashSet<L4Proto> = self
            .state()
            .leases
            .iter()
            .map(|(_, l)| l.flow.proto)
            .collect();
        let mut live = HashMap::new();
        for proto in protos {
            let sockets = match proto {
                L4Proto::Tcp => match rss::live::tcp_sockets() {
                    Ok(list) => Some(
                        list.iter()
                            .map(|s| (canonical(s.local), canonical(s.remote)))
                            .collect(),
                    ),
                    Err(_) => self.proc_sockets(proto),
                },
                _ => self.proc_sockets(proto),
            };
            if let Some(sockets) = sockets {
                live.insert(proto, sockets);
            }
        }
        self.sweep(&live)
    }

    fn proc_sockets(&self, proto: L4Proto) -> Option<HashSet<(SocketAddr, SocketAddr)>> {
        let host = LocalPorts::read_from(&self.proc_root, proto).ok()?;
        Some(connections_of(&host).collect())
    }

    /// Answers one request line. `may_configure` says whether the peer may
    /// send `set_config` (root or the allocator's own user).
    pub fn handle_line(&self, line: &str, may_configure: bool) -> String {
        let result = parse_request(line).and_then(|request| match request {
            Request::Lease {
                proto,
                local,
                remote,
                remote_port,
                count: None,
            } => self
                .lease(proto, local, remote, remote_port)
                .map(|r| to_line(&r)),
            Request::Lease {
                proto,
                local,
                remote,
                remote_port,
                count: Some(count),
            } => self
                .lease_batch(proto, local, remote, remote_port, count)
                .map(|leases| {
                    to_line(&BatchResponse {
                        v: VERSION,
                        leases: leases.into_iter().map(BatchLease::from).collect(),
                    })
                }),
            Request::Release { lease } => self.release(lease).map(|()| ok_line()),
            Request::SetConfig { remote, config } => {
                if !may_configure {
                    return Err(Refusal::new(
                        ErrorCode::Forbidden,
                        "set_config is allowed only for root and the allocator's user",
                    ));
                }
                self.set_config(remote, *config).map(|()| ok_line())
            }
            Request::Status => Ok(to_line(&self.status())),
        });
        result.unwrap_or_else(|refusal| refusal.to_line())
    }
}

/// Makes sure the predictor of `key` is cached (the receiver's config
/// must be known).
fn ensure_predictor(state: &mut State, key: PredictorKey) -> Result<(), Refusal> {
    let (proto, local, remote, remote_port) = key;
    if state.predictors.contains_key(&key) {
        return Ok(());
    }
    let Some(config) = state.configs.get(&remote) else {
        return Err(Refusal::new(
            ErrorCode::NoConfig,
            format!("no RSS config for remote {remote} (send set_config, or start the allocator with --config FILE --for {remote}, or --agent URL)"),
        ));
    };
    let predictor =
        PortPredictor::new(config, local, remote, remote_port, proto).map_err(refuse)?;
    if state.predictors.len() >= PREDICTOR_CACHE {
        state.predictors.clear();
    }
    state.predictors.insert(key, predictor);
    Ok(())
}

/// Plans `count` ports for `key` (its predictor cached): distinct CPUs
/// first, then queues, counting every flow from this sender to the
/// receiver (leases, and connections made without the allocator), never a
/// port in use, leased, or offered in the table.
fn plan_locked(
    state: &State,
    key: PredictorKey,
    host: &HostSnapshot,
    connections: &[Tuple],
    count: usize,
) -> Result<Vec<crate::plan::PlanEntry>, Refusal> {
    let (proto, local, remote, _) = key;
    let Some(predictor) = state.predictors.get(&key) else {
        return Err(Refusal::new(ErrorCode::Internal, "predictor cache"));
    };
    let leases = &state.leases;
    let mut options = PlanOptions::from_local(&host.ports);
    options.excluded.union_with(leases.ports());
    if let Some(book) = &state.table {
        options.excluded.union_with(book.offered());
    }
    // Every flow from this sender to the receiver counts, whatever its
    // ports, because they share the receiver's queues (8 clients to 8
    // server ports must not all be given the queue that is emptiest for
    // their own port).
    if let Some(flows) = leases.pair(local, remote) {
        options.existing = flows.cpus.clone();
        options.existing_queues = flows.queues.clone();
    }
    for &(l, r) in connections {
        if r.ip() == remote && l.ip() == local && !leases.ports().contains(l.port()) {
            let flow = rss::FlowTuple::new(l.ip(), l.port(), r.ip(), r.port(), proto);
            if let Ok(place) = predictor.config().place(&flow) {
                *options.existing.entry(place.cpu).or_default() += 1;
                *options.existing_queues.entry(place.queue).or_default() += 1;
            }
        }
    }
    Ok(plan(predictor, count, &options).map_err(refuse)?.entries)
}

/// Records a lease of `port` for `key`; returns its id.
fn grant(
    state: &mut State,
    key: PredictorKey,
    port: u16,
    queue: u32,
    cpu: u32,
    now: Instant,
) -> u64 {
    let (proto, local, remote, remote_port) = key;
    let id = state.next_id;
    state.next_id += 1;
    state.leases.insert(
        id,
        Lease {
            flow: LeasedFlow {
                proto,
                local,
                remote,
                remote_port,
                port,
                queue,
                cpu,
            },
            granted: now,
            connected: false,
        },
    );
    id
}

/// Turns claimed table slots into leases (their grace period starts now:
/// the shim's connect follows its claim at once).
fn absorb(state: &mut State, proto: L4Proto, claims: Vec<(RegionKey, Offer)>) {
    let now = Instant::now();
    for (rkey, offer) in claims {
        let key = (proto, rkey.local, rkey.remote, rkey.remote_port);
        grant(state, key, offer.port, offer.queue, offer.cpu, now);
    }
}

/// Plans a full region of offers for `key` (emptied before) and writes
/// them; a plan that fails leaves the region empty, and shims fall back to
/// the round trip.
fn refill(
    state: &mut State,
    region: usize,
    key: PredictorKey,
    host: &HostSnapshot,
    connections: &[Tuple],
    used: bool,
) {
    let Ok(entries) = plan_locked(state, key, host, connections, LT_SLOTS) else {
        return;
    };
    if let Some(book) = state.table.as_mut() {
        book.fill(region, &entries, used);
    }
}

fn ok_line() -> String {
    to_line(&OkResponse {
        v: VERSION,
        ok: true,
    })
}

/// How the server runs.
#[derive(Clone)]
pub struct ServerOptions {
    pub socket: PathBuf,
    /// A lease without a matching socket lives this long (default 2 s).
    pub grace: Duration,
    /// How often leases are checked against live sockets.
    pub sweep_interval: Duration,
    /// Clients connected at once; more get a `busy` error.
    pub max_clients: usize,
    /// A client silent this long is disconnected.
    pub idle_timeout: Duration,
    /// procfs root for ports in use.
    pub proc_root: PathBuf,
    /// Where configs not given with `set_config` come from.
    pub config_source: Option<Arc<dyn ConfigSource>>,
    /// How long a fetched config is used before it is fetched again.
    pub config_ttl: Duration,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("socket", &self.socket)
            .field("grace", &self.grace)
            .field("config_source", &self.config_source.is_some())
            .finish_non_exhaustive()
    }
}

/// An `Arc`'d source is a source.
impl<T: ConfigSource + ?Sized> ConfigSource for Arc<T> {
    fn fetch(&self, remote: IpAddr) -> Result<RssConfig, String> {
        (**self).fetch(remote)
    }
}

impl ServerOptions {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        ServerOptions {
            socket: socket.into(),
            grace: Duration::from_secs(2),
            sweep_interval: Duration::from_millis(200),
            max_clients: 256,
            idle_timeout: Duration::from_secs(30),
            proc_root: PathBuf::from("/proc"),
            config_source: None,
            config_ttl: Duration::from_secs(10),
        }
    }
}

/// The allocator on a Unix socket.
pub struct Server {
    listener: UnixListener,
    allocator: Arc<Allocator>,
    options: ServerOptions,
    stop: Arc<AtomicBool>,
    /// Held while the server lives: a second allocator on the same path
    /// fails instead of stealing the socket.
    _lock: nix::fcntl::Flock<std::fs::File>,
}

fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

impl Server {
    /// Creates the socket (and its directory), mode 0666 so any local user
    /// can lease; a stale socket file from a dead allocator is replaced.
    pub fn bind(options: ServerOptions) -> Result<Self, AllocError> {
        let path = options.socket.clone();
        let io_err = |source: io::Error| AllocError::Listen {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        let lock_file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(lock_path(&path))
            .map_err(io_err)?;
        let lock = nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|_| AllocError::AlreadyRunning(path.clone()))?;
        if path.exists() {
            if UnixStream::connect(&path).is_ok() {
                return Err(AllocError::AlreadyRunning(path));
            }
            std::fs::remove_file(&path).map_err(io_err)?;
        }
        let listener = UnixListener::bind(&path).map_err(io_err)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).map_err(io_err)?;
        // The lease table next to the socket (docs/binders.md): shims claim
        // planned ports from it without a round trip.
        let table_file = table::table_path(&path);
        let map = Mapping::create(&table_file).map_err(|source| AllocError::Listen {
            path: table_file,
            source,
        })?;
        let allocator = match &options.config_source {
            Some(source) => Allocator::new(&options.proc_root, options.grace)
                .with_config_source(Box::new(source.clone()), options.config_ttl),
            None => Allocator::new(&options.proc_root, options.grace),
        };
        Ok(Server {
            listener,
            allocator: Arc::new(allocator.with_table(map)),
            options,
            stop: Arc::new(AtomicBool::new(false)),
            _lock: lock,
        })
    }

    pub fn allocator(&self) -> &Arc<Allocator> {
        &self.allocator
    }

    pub fn path(&self) -> &Path {
        &self.options.socket
    }

    /// Serves until the stop flag of a [`ServerHandle`] is set.
    pub fn run(self) -> Result<(), AllocError> {
        let sweeper = {
            let (allocator, stop) = (self.allocator.clone(), self.stop.clone());
            let interval = self.options.sweep_interval;
            allocator.refresh_host_ports();
            std::thread::spawn(move || {
                let mut last_sweep = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(HOST_REFRESH.min(interval));
                    allocator.refresh_host_ports();
                    if last_sweep.elapsed() < interval {
                        continue;
                    }
                    last_sweep = Instant::now();
                    allocator.sweep_now();
                }
            })
        };
        let tender = {
            let (allocator, stop) = (self.allocator.clone(), self.stop.clone());
            std::thread::spawn(move || {
                let mut seen = 0;
                while !stop.load(Ordering::Relaxed) {
                    match allocator.wait_for_claims(seen) {
                        Some(now) => seen = now,
                        None => return,
                    }
                    allocator.tend_table();
                }
            })
        };
        let active = Arc::new(AtomicUsize::new(0));
        let my_uid = nix::unistd::geteuid().as_raw();
        for stream in self.listener.incoming() {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let mut stream = match stream {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.raw_os_error(), Some(23 | 24)) => {
                    // ENFILE/EMFILE
                    // Out of file descriptors: back off instead of spinning.
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(source) => {
                    return Err(AllocError::Io {
                        path: self.options.socket.clone(),
                        source,
                    })
                }
            };
            if active.load(Ordering::Relaxed) >= self.options.max_clients {
                let busy = Refusal::new(ErrorCode::Busy, "too many clients; try again");
                let _ = stream.write_all(busy.to_line().as_bytes());
                continue;
            }
            let may_configure =
                nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)
                    .is_ok_and(|c| c.uid() == 0 || c.uid() == my_uid);
            active.fetch_add(1, Ordering::Relaxed);
            let (allocator, active) = (self.allocator.clone(), active.clone());
            let idle = self.options.idle_timeout;
            std::thread::spawn(move || {
                let _ = serve_client(stream, &allocator, may_configure, idle);
                active.fetch_sub(1, Ordering::Relaxed);
            });
        }
        let _ = sweeper.join();
        let _ = tender.join();
        self.allocator.retire_table();
        let _ = std::fs::remove_file(&self.options.socket);
        let _ = std::fs::remove_file(table::table_path(&self.options.socket));
        Ok(())
    }

    /// Runs the server on a background thread.
    pub fn spawn(self) -> ServerHandle {
        let stop = self.stop.clone();
        let path = self.options.socket.clone();
        let allocator = self.allocator.clone();
        // A second handle on the listening socket, to wake the accept loop
        // on drop even when the socket's path is gone.
        let listener = self.listener.try_clone().ok();
        let thread = std::thread::spawn(move || self.run());
        ServerHandle {
            stop,
            path,
            allocator,
            listener,
            thread: Some(thread),
        }
    }
}

/// A server running on a background thread; dropping it stops the server
/// and removes the socket.
pub struct ServerHandle {
    stop: Arc<AtomicBool>,
    path: PathBuf,
    allocator: Arc<Allocator>,
    listener: Option<UnixListener>,
    thread: Option<JoinHandle<Result<(), AllocError>>>,
}

impl ServerHandle {
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn allocator(&self) -> &Arc<Allocator> {
        &self.allocator
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop: shutdown(2) on a listening socket makes a
        // blocked accept return at once; connecting to the path is the
        // fallback, and needs the path to still exist.
        let woken = self.listener.as_ref().is_some_and(|l| {
            nix::sys::socket::shutdown(l.as_raw_fd(), nix::sys::socket::Shutdown::Both).is_ok()
        });
        if !woken {
            let _ = UnixStream::connect(&self.path);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

enum Line {
    Text(Vec<u8>),
    TooLong,
    Eof,
}

/// Reads one line of at most [`MAX_LINE`] bytes, never buffering more.
fn read_line<R: BufRead>(reader: &mut R) -> io::Result<Line> {
    let mut buf = Vec::new();
    let n = io::Read::take(reader, MAX_LINE as u64 + 1).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(Line::Eof);
    }
    if buf.last() != Some(&b'\n') && buf.len() > MAX_LINE {
        return Ok(Line::TooLong);
    }
    Ok(Line::Text(buf))
}

fn serve_client(
    stream: UnixStream,
    allocator: &Allocator,
    may_configure: bool,
    idle: Duration,
) -> io::Result<()> {
    stream.set_read_timeout(Some(idle))?;
    stream.set_write_timeout(Some(idle))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let response = match read_line(&mut reader)? {
            Line::Eof => return Ok(()),
            Line::TooLong => {
                let refusal = Refusal::new(
                    ErrorCode::TooLong,
                    format!("request line longer than {MAX_LINE} bytes"),
                );
                writer.write_all(refusal.to_line().as_bytes())?;
                return Ok(());
            }
            Line::Text(bytes) => match std::str::from_utf8(&bytes) {
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => allocator.handle_line(text.trim(), may_configure),
                Err(_) => Refusal::new(ErrorCode::BadRequest, "request is not UTF-8").to_line(),
            },
        };
        writer.write_all(response.as_bytes())?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_without_buffering_them() {
        let mut big = vec![b'x'; MAX_LINE + 10];
        big.push(b'\n');
        let mut reader = io::Cursor::new(big);
        assert!(matches!(read_line(&mut reader).unwrap(), Line::TooLong));
        let mut reader = io::Cursor::new(b"{}\nrest".to_vec());
        assert!(matches!(read_line(&mut reader).unwrap(), Line::Text(t) if t == b"{}\n"));
        assert!(matches!(read_line(&mut reader).unwrap(), Line::Text(t) if t == b"rest"));
        assert!(matches!(read_line(&mut reader).unwrap(), Line::Eof));
    }
}

//! TCP traffic through the load balancer: a server in every backend (bound
//! to the VIP), and clients whose connections check what they get back.
//!
//! Protocol of one connection: the client sends an 8-byte big-endian length
//! `L`, then `L` bytes (in chunks, with pauses for long connections); the
//! backend answers, after reading all of them, with `L` and its server id
//! (8 + 4 bytes). A connection fails when any step errors, times out or the
//! answer does not match: that is what "no connection broke" is checked
//! with.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::LbXdpError;

/// The servers of all backends; they stop when dropped.
pub struct Servers {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<Result<(), String>>>,
}

impl Servers {
    /// Starts a server on `vip:port` in each namespace; server id = index.
    pub fn start(netns: &[String], vip: Ipv4Addr, port: u16) -> Result<Servers, LbXdpError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        for (id, ns) in netns.iter().enumerate() {
            let listener = {
                let addr = SocketAddr::V4(SocketAddrV4::new(vip, port));
                host::netns::run_in(Some(ns), move || TcpListener::bind(addr))?
                    .map_err(|e| LbXdpError::io(format!("bind {vip}:{port} in {ns}"), e))?
            };
            listener
                .set_nonblocking(true)
                .map_err(|e| LbXdpError::io("set_nonblocking", e))?;
            let stop = stop.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("srv{id}"))
                    .spawn(move || serve(listener, id as u32, stop))
                    .map_err(|e| LbXdpError::io("spawn server", e))?,
            );
        }
        Ok(Servers { stop, handles })
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

fn serve(listener: TcpListener, id: u32, stop: Arc<AtomicBool>) -> Result<(), String> {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let _ = handle(stream, id, &stop);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    Ok(())
}

fn handle(mut s: TcpStream, id: u32, stop: &AtomicBool) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut head = [0u8; 8];
    read_full(&mut s, &mut head, stop)?;
    let mut left = u64::from_be_bytes(head);
    let want = left;
    let mut buf = vec![0u8; 64 * 1024];
    while left > 0 {
        let n = (buf.len() as u64).min(left) as usize;
        match s.read(&mut buf[..n]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(k) => left -= k as u64,
            Err(e) if is_timeout(&e) && !stop.load(Ordering::Relaxed) => continue,
            Err(e) => return Err(e),
        }
    }
    let mut answer = want.to_be_bytes().to_vec();
    answer.extend_from_slice(&id.to_be_bytes());
    s.write_all(&answer)
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

fn read_full(s: &mut TcpStream, buf: &mut [u8], stop: &AtomicBool) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(k) => got += k,
            Err(e) if is_timeout(&e) && !stop.load(Ordering::Relaxed) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One connection's shape.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ConnShape {
    pub bytes: u64,
    /// Bytes per write.
    pub chunk: usize,
    /// Pause after each chunk (long-lived connections).
    pub pause: Duration,
}

/// What one connection did: the backend that answered.
pub fn connect_once(vip: Ipv4Addr, port: u16, shape: ConnShape) -> Result<u32, String> {
    let addr = SocketAddr::V4(SocketAddrV4::new(vip, port));
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
        .map_err(|e| format!("connect: {e}"))?;
    exchange(s, shape)
}

/// The client side of one connection after `connect`: send, then check the
/// answer; returns the backend's server id.
pub fn exchange(mut s: TcpStream, shape: ConnShape) -> Result<u32, String> {
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    s.write_all(&shape.bytes.to_be_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let chunk = vec![0x5au8; shape.chunk.max(1)];
    let mut left = shape.bytes;
    while left > 0 {
        let n = (chunk.len() as u64).min(left) as usize;
        s.write_all(&chunk[..n])
            .map_err(|e| format!("write: {e}"))?;
        left -= n as u64;
        if !shape.pause.is_zero() && left > 0 {
            std::thread::sleep(shape.pause);
        }
    }
    let mut answer = [0u8; 12];
    s.read_exact(&mut answer)
        .map_err(|e| format!("read answer: {e}"))?;
    let mut len = [0u8; 8];
    len.copy_from_slice(&answer[..8]);
    if u64::from_be_bytes(len) != shape.bytes {
        return Err(format!(
            "answer says {} bytes, sent {}",
            u64::from_be_bytes(len),
            shape.bytes
        ));
    }
    Ok(u32::from_be_bytes([
        answer[8], answer[9], answer[10], answer[11],
    ]))
}

/// Totals of a workload.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WorkloadResult {
    pub connections: u64,
    pub short: u64,
    pub long: u64,
    pub failures: u64,
    /// First few failure reasons.
    pub errors: Vec<String>,
    /// Payload bytes acknowledged by backends.
    pub bytes: u64,
    /// Connections answered by each backend.
    pub per_backend: Vec<u64>,
    pub seconds: f64,
}

/// A mix of short and long connections from every client namespace,
/// `workers` threads per client, until `duration` has passed. Every
/// `long_every`-th connection of a worker is long.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Workload {
    pub workers: u32,
    pub duration: Duration,
    pub short: ConnShape,
    pub long: ConnShape,
    pub long_every: u32,
}

impl Workload {
    pub fn run(
        &self,
        clients: &[String],
        vip: Ipv4Addr,
        port: u16,
        backends: usize,
    ) -> Result<WorkloadResult, LbXdpError> {
        let start = Instant::now();
        let deadline = start + self.duration;
        let bytes = Arc::new(AtomicU64::new(0));
        let mut handles = Vec::new();
        for ns in clients {
            for w in 0..self.workers {
                let me = *self;
                let bytes = bytes.clone();
                handles.push(host::netns::spawn_in(ns, move || {
                    let mut r = WorkloadResult {
                        per_backend: vec![0; backends],
                        ..Default::default()
                    };
                    let mut i = w;
                    while Instant::now() < deadline {
                        let long = me.long_every > 0 && i % me.long_every == 0;
                        i += 1;
                        let shape = if long { me.long } else { me.short };
                        r.connections += 1;
                        match connect_once(vip, port, shape) {
                            Ok(server) => {
                                if long {
                                    r.long += 1;
                                } else {
                                    r.short += 1;
                                }
                                bytes.fetch_add(shape.bytes, Ordering::Relaxed);
                                if let Some(c) = r.per_backend.get_mut(server as usize) {
                                    *c += 1;
                                }
                            }
                            Err(e) => {
                                r.failures += 1;
                                if r.errors.len() < 5 {
                                    r.errors.push(e);
                                }
                            }
                        }
                    }
                    r
                })?);
            }
        }
        let mut total = WorkloadResult {
            per_backend: vec![0; backends],
            ..Default::default()
        };
        for h in handles {
            let r = h
                .join()
                .map_err(|_| LbXdpError::config("client thread panicked"))??;
            total.connections += r.connections;
            total.short += r.short;
            total.long += r.long;
            total.failures += r.failures;
            for e in r.errors {
                if total.errors.len() < 10 {
                    total.errors.push(e);
                }
            }
            for (t, n) in total.per_backend.iter_mut().zip(r.per_backend) {
                *t += n;
            }
        }
        total.bytes = bytes.load(Ordering::Relaxed);
        total.seconds = start.elapsed().as_secs_f64();
        Ok(total)
    }
}

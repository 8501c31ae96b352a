//! The data path's service: runs the endpoint and serves application
//! contexts over a UNIX socket (control) and shared memory (payload rings),
//! moving bytes between each endpoint connection and its rings (the
//! context queue and payload copy of thesis chapter 3, with the
//! application in another process).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::ctl;
use super::layout::{
    app_flag, c, event, Addresses, Request, Response, Slot, SlotState, HOLDS_UNCOUNTED, PROCS,
    RING_SIZE, SLOTS,
};
use super::notice::Notice;
use super::request::Command;
use super::shm::Shm;
use crate::endpoint::{Endpoint, ToeError};
use crate::stages::ConnIdx;

/// How long the service sleeps when nothing moved (the endpoint's timers
/// are hundreds of milliseconds; the port, doorbells and control sockets
/// wake it sooner).
const IDLE_WAIT: Duration = Duration::from_millis(5);
/// How long it sleeps when no timer of the endpoint can fire
/// ([`Endpoint::is_quiet`]: only a frame or an application gives it
/// work), so an idle data path gives its core back.
const QUIET_WAIT: Duration = Duration::from_millis(100);

/// A connection behind a slot.
struct Served {
    conn: ConnIdx,
    /// The program's descriptor for it, and its readiness.
    notice: Notice,
    /// The addresses, once established (to tell a reused index apart).
    addrs: Option<(SocketAddr, SocketAddr)>,
    /// EOF or reset seen: the endpoint is not asked for bytes again.
    rx_done: bool,
    fin_sent: bool,
    app_closed: bool,
}

struct Listener {
    port: u16,
    /// What the application polls: readable while connections wait
    /// ([`ctl::listener_pipe`]), never writable.
    ready: OwnedFd,
    /// Raises `ready`.
    raise: OwnedFd,
    pending: VecDeque<ConnIdx>,
}

/// Entry `i` of a context's table (or of the contexts), or EBADF: what
/// the kernel answers for a descriptor that names nothing.
fn entry<T>(table: &mut [Option<T>], i: usize) -> Result<&mut T, i32> {
    table.get_mut(i).and_then(Option::as_mut).ok_or(libc::EBADF)
}

/// A free connection slot of a context and the notice descriptor for it; or
/// EMFILE when every slot is taken (the kernel's answer when a process's
/// descriptors are used up), or the errno of making the descriptor.
fn free_slot(slots: &[Option<Served>]) -> Result<(usize, Notice), i32> {
    let i = slots.iter().position(Option::is_none).ok_or(libc::EMFILE)?;
    Ok((i, Notice::new().map_err(errno)?))
}

/// One process's control connection to its context.
struct Control {
    fd: OwnedFd,
    /// The process's number in the context ([`Slot::holds`]): 0 for the
    /// one that said HELLO; None for a child that joined when all were
    /// taken (its descriptors are not counted).
    proc: Option<usize>,
}

/// One application context: its shared memory and the connections and
/// listeners it holds.
struct Context {
    ctl: Vec<Control>,
    doorbell: OwnedFd,
    shm: Shm,
    slots: Vec<Option<Served>>,
    listeners: Vec<Option<Listener>>,
}

/// A connection whose application is gone and whose FIN is sent: read to
/// the peer's FIN so the endpoint can free it.
struct Orphan {
    conn: ConnIdx,
    addrs: Option<(SocketAddr, SocketAddr)>,
}

/// The service.
pub struct Service {
    ep: Endpoint,
    path: PathBuf,
    listener: OwnedFd,
    /// Control connections that have not said HELLO or JOIN yet.
    fresh: Vec<OwnedFd>,
    contexts: Vec<Option<Context>>,
    orphans: Vec<Orphan>,
    scratch: Vec<u8>,
}

impl Service {
    /// Serves `ep` to applications connecting at `path` (removed first if a
    /// stale socket is there; removed again on drop).
    pub fn new(ep: Endpoint, path: &Path) -> std::io::Result<Service> {
        if std::fs::symlink_metadata(path).is_ok() {
            std::fs::remove_file(path)?;
        }
        let listener = ctl::listen(path)?;
        Ok(Service {
            ep,
            path: path.to_path_buf(),
            listener,
            fresh: Vec::new(),
            contexts: Vec::new(),
            orphans: Vec::new(),
            scratch: vec![0; 65536],
        })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    /// Runs until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) -> Result<(), ToeError> {
        while !stop.load(Ordering::Relaxed) {
            let before = self.ep.counters();
            self.ep.poll()?;
            self.control()?;
            let moved = self.serve();
            let after = self.ep.counters();
            let busy =
                moved || after.rx_frames != before.rx_frames || after.tx_frames != before.tx_frames;
            let wait = if busy {
                Duration::ZERO
            } else if self.ep.is_quiet() {
                QUIET_WAIT
            } else {
                IDLE_WAIT
            };
            self.wait(wait)?;
        }
        Ok(())
    }

    fn wait(&self, timeout: Duration) -> Result<(), ToeError> {
        let mut fds: Vec<RawFd> = vec![self.ep.port().as_raw_fd(), self.listener.as_raw_fd()];
        fds.extend(self.ep.wake_fd());
        fds.extend(self.fresh.iter().map(AsRawFd::as_raw_fd));
        for cx in self.contexts.iter().flatten() {
            fds.push(cx.doorbell.as_raw_fd());
            fds.extend(cx.ctl.iter().map(|c| c.fd.as_raw_fd()));
        }
        pktio::wait_fds(&fds, Some(timeout)).map_err(|e| ToeError::Config(format!("poll: {e}")))?;
        Ok(())
    }

    /// New control connections and the requests on all of them.
    fn control(&mut self) -> Result<(), ToeError> {
        let io = |e: std::io::Error| ToeError::Config(format!("control socket: {e}"));
        while let Some(fd) = ctl::accept(&self.listener).map_err(io)? {
            self.fresh.push(fd);
        }
        for fd in std::mem::take(&mut self.fresh) {
            match ctl::recv_request(&fd) {
                Ok(Some(req)) => self.first_request(fd, &req),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => self.fresh.push(fd),
                // Gone, or not speaking the protocol.
                _ => {}
            }
        }
        for id in 0..self.contexts.len() {
            self.context_requests(id);
        }
        Ok(())
    }

    fn first_request(&mut self, fd: OwnedFd, req: &Request) {
        match Command::of(req) {
            Ok(Command::Hello) => match self.hello() {
                Ok((id, memfd, doorbell)) => {
                    let resp = Response {
                        id: id as u32,
                        addrs: Addresses::local(self.ep.local_addr(), 0),
                        ..Response::default()
                    };
                    if ctl::send_response(&fd, &resp, &[memfd, doorbell]).is_ok() {
                        if let Some(cx) = self.contexts[id].as_mut() {
                            cx.ctl.push(Control { fd, proc: Some(0) });
                        }
                    }
                }
                Err(e) => reply_err(&fd, e.raw_os_error().unwrap_or(libc::ENOMEM)),
            },
            Ok(Command::Join { context }) => match entry(&mut self.contexts, context as usize).ok()
            {
                Some(cx) if !cx.ctl.is_empty() => {
                    // The lowest number no live process of the context has.
                    let proc = (0..PROCS).find(|p| cx.ctl.iter().all(|c| c.proc != Some(*p)));
                    let resp = Response {
                        id: proc.unwrap_or(PROCS) as u32,
                        ..Response::default()
                    };
                    if ctl::send_response(&fd, &resp, &[]).is_ok() {
                        cx.ctl.push(Control { fd, proc });
                    }
                }
                _ => reply_err(&fd, libc::ENOENT),
            },
            // A context's requests before the context exists.
            Ok(_) => reply_err(&fd, libc::EPROTO),
            Err(errno) => reply_err(&fd, errno),
        }
    }

    fn hello(&mut self) -> std::io::Result<(usize, RawFd, RawFd)> {
        let shm = Shm::create()?;
        let doorbell = ctl::eventfd()?;
        let cx = Context {
            ctl: Vec::new(),
            doorbell,
            shm,
            slots: (0..SLOTS).map(|_| None).collect(),
            listeners: Vec::new(),
        };
        let id = match self.contexts.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.contexts.push(None);
                self.contexts.len() - 1
            }
        };
        let fds = (cx.shm.fd().as_raw_fd(), cx.doorbell.as_raw_fd());
        self.contexts[id] = Some(cx);
        Ok((id, fds.0, fds.1))
    }

    fn context_requests(&mut self, id: usize) {
        let Some(cx) = self.contexts[id].as_mut() else {
            return;
        };
        let mut requests = Vec::new();
        let mut ended = Vec::new();
        // A control connection that ended (the process, or a forked child,
        // is gone) or sent garbage is dropped.
        cx.ctl.retain(|c| loop {
            match ctl::recv_request(&c.fd) {
                Ok(Some(req)) => requests.push((c.fd.as_raw_fd(), req)),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => {
                    ended.extend(c.proc);
                    return false;
                }
            }
        });
        for (fd, req) in requests {
            self.request(id, fd, &req);
        }
        for proc in ended {
            self.process_ended(id, proc);
        }
        if self.contexts[id].as_ref().is_some_and(|c| c.ctl.is_empty()) {
            self.abandon(id);
        }
    }

    /// Process `proc` of context `id` ended (its control connection
    /// closed) with descriptors still open, as a killed or exiting process
    /// leaves them: its share of each connection's references goes, and a
    /// connection no other process holds is closed, as the kernel closes a
    /// dead process's sockets (its FIN follows the bytes it wrote).
    fn process_ended(&mut self, id: usize, proc: usize) {
        let Some(cx) = self.contexts[id].as_ref() else {
            return;
        };
        let mut unheld = Vec::new();
        for i in 0..SLOTS {
            if cx.slots[i].is_none() {
                continue;
            }
            let slot = cx.shm.slot(i);
            let n = u32::from(slot.holds[proc].swap(0, Ordering::AcqRel));
            if n == 0 || n == u32::from(HOLDS_UNCOUNTED) {
                continue;
            }
            let before = slot
                .refs
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                    Some(r.saturating_sub(n))
                })
                // The update never declines: Err cannot come.
                .unwrap_or_else(|r| r);
            if before <= n {
                unheld.push(i);
            }
        }
        for i in unheld {
            let _ = self.close(id, i);
        }
    }

    /// Every control connection of context `id` closed: its listeners stop
    /// and its connections are closed as if the application had closed them.
    fn abandon(&mut self, id: usize) {
        let Some(cx) = self.contexts[id].as_mut() else {
            return;
        };
        let listeners: Vec<Listener> = cx.listeners.drain(..).flatten().collect();
        for s in cx.slots.iter_mut().flatten() {
            s.app_closed = true;
        }
        for l in listeners {
            self.stop_listening(l);
        }
    }

    fn stop_listening(&mut self, l: Listener) {
        let conns = l.pending.into_iter().chain(self.ep.unlisten(l.port));
        for conn in conns.collect::<Vec<_>>() {
            let addrs = self.ep.addresses(conn);
            let _ = self.ep.close(conn);
            self.orphans.push(Orphan { conn, addrs });
        }
    }

    /// One request of context `id` on control connection `fd`.
    fn request(&mut self, id: usize, fd: RawFd, req: &Request) {
        let result = Command::of(req).and_then(|command| match command {
            Command::Listen { port } => self.listen(id, port),
            Command::Accept { listener } => self.accept(id, listener as usize),
            Command::Connect { remote, local_port } => self.connect(id, remote, local_port),
            Command::Close { slot } => self.close(id, slot),
            Command::Unlisten { listener } => self.unlisten(id, listener as usize),
            // HELLO and JOIN come first on a control connection, once.
            Command::Hello | Command::Join { .. } => Err(libc::EPROTO),
        });
        let Some(cx) = self.contexts[id].as_ref() else {
            return;
        };
        let Some(sock) = cx
            .ctl
            .iter()
            .find(|c| c.fd.as_raw_fd() == fd)
            .map(|c| &c.fd)
        else {
            return;
        };
        match result {
            Ok((resp, efd)) => {
                let fds: Vec<RawFd> = efd.into_iter().collect();
                let _ = ctl::send_response(sock, &resp, &fds);
            }
            Err(errno) => reply_err(sock, errno),
        }
    }

    fn listen(&mut self, id: usize, port: u16) -> Result<(Response, Option<RawFd>), i32> {
        let taken = self
            .contexts
            .iter()
            .flatten()
            .flat_map(|c| c.listeners.iter().flatten())
            .any(|l| l.port == port);
        if taken {
            return Err(libc::EADDRINUSE);
        }
        let (ready, raise) = ctl::listener_pipe().map_err(errno)?;
        self.ep.listen(port);
        let cx = entry(&mut self.contexts, id)?;
        let l = Listener {
            port,
            ready,
            raise,
            pending: VecDeque::new(),
        };
        let raw = l.ready.as_raw_fd();
        let lid = match cx.listeners.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                cx.listeners.push(None);
                cx.listeners.len() - 1
            }
        };
        cx.listeners[lid] = Some(l);
        let resp = Response {
            id: lid as u32,
            addrs: Addresses::local(self.ep.local_addr(), port),
            ..Response::default()
        };
        Ok((resp, Some(raw)))
    }

    fn accept(&mut self, id: usize, lid: usize) -> Result<(Response, Option<RawFd>), i32> {
        let cx = entry(&mut self.contexts, id)?;
        let l = entry(&mut cx.listeners, lid)?;
        let Some(&conn) = l.pending.front() else {
            return Err(libc::EAGAIN);
        };
        let (i, notice) = free_slot(&cx.slots)?;
        l.pending.pop_front();
        // Keep the listener's descriptor readable while more wait.
        if l.pending.is_empty() {
            ctl::drain(&l.ready);
        } else {
            ctl::raise(&l.raise);
        }
        let addrs = self.ep.addresses(conn);
        cx.shm.reset(i);
        copy_info(&self.ep, cx.shm.slot(i), conn);
        cx.shm.publish(i, addrs, SlotState::Established as u32);
        let raw = notice.app_fd();
        // Bytes that arrived with the handshake make it readable when the
        // slot is next served.
        cx.slots[i] = Some(Served {
            conn,
            notice,
            addrs,
            rx_done: false,
            fin_sent: false,
            app_closed: false,
        });
        Ok((response(i, addrs), Some(raw)))
    }

    fn connect(
        &mut self,
        id: usize,
        remote: SocketAddr,
        local_port: Option<u16>,
    ) -> Result<(Response, Option<RawFd>), i32> {
        let cx = entry(&mut self.contexts, id)?;
        let (i, notice) = free_slot(&cx.slots)?;
        let opened = match local_port {
            None => self.ep.connect(remote),
            Some(bound) => self.ep.connect_from(bound, remote),
        };
        let conn = opened.map_err(|e| match e {
            ToeError::AddrInUse(_) => libc::EADDRINUSE,
            ToeError::Config(m) if m.contains("family") => libc::EAFNOSUPPORT,
            ToeError::Config(m) if m.contains("port") => libc::EADDRNOTAVAIL,
            _ => libc::ENOBUFS,
        })?;
        let cx = entry(&mut self.contexts, id)?;
        cx.shm.reset(i);
        cx.shm.publish(i, None, SlotState::Connecting as u32);
        let raw = notice.app_fd();
        cx.slots[i] = Some(Served {
            conn,
            notice,
            addrs: None,
            rx_done: false,
            fin_sent: false,
            app_closed: false,
        });
        Ok((response(i, None), Some(raw)))
    }

    fn close(&mut self, id: usize, i: usize) -> Result<(Response, Option<RawFd>), i32> {
        let cx = entry(&mut self.contexts, id)?;
        let s = entry(&mut cx.slots, i)?;
        s.app_closed = true;
        let state = SlotState::of(cx.shm.slot(i).state.load(Ordering::Relaxed));
        let reset = cx.shm.slot(i).events.load(Ordering::Relaxed) & event::RESET != 0;
        // An open in progress or failed, or a reset connection: nothing to
        // send, free it now.
        if state != SlotState::Established || reset {
            let _ = self.ep.close(s.conn);
            cx.shm.publish(i, None, SlotState::Free as u32);
            cx.slots[i] = None;
        }
        Ok((Response::default(), None))
    }

    fn unlisten(&mut self, id: usize, lid: usize) -> Result<(Response, Option<RawFd>), i32> {
        let cx = entry(&mut self.contexts, id)?;
        let l = cx
            .listeners
            .get_mut(lid)
            .and_then(Option::take)
            .ok_or(libc::EBADF)?;
        self.stop_listening(l);
        Ok((Response::default(), None))
    }

    /// Moves bytes for every connection; returns whether any moved.
    fn serve(&mut self) -> bool {
        let mut moved = false;
        for cx in self.contexts.iter_mut().flatten() {
            ctl::drain(&cx.doorbell);
            for l in cx.listeners.iter_mut().flatten() {
                let mut any = false;
                while let Some(conn) = self.ep.accept(l.port) {
                    l.pending.push_back(conn);
                    any = true;
                }
                if any {
                    ctl::raise(&l.raise);
                }
            }
            for i in 0..SLOTS {
                let Some(s) = cx.slots[i].as_mut() else {
                    continue;
                };
                let step = serve_slot(&mut self.ep, &cx.shm, i, s, &mut self.scratch);
                moved |= step.moved;
                if step.finished {
                    if let Some(s) = cx.slots[i].take() {
                        if !s.rx_done {
                            self.orphans.push(Orphan {
                                conn: s.conn,
                                addrs: s.addrs,
                            });
                        }
                    }
                    cx.shm.publish(i, None, SlotState::Free as u32);
                }
            }
        }
        for c in self.contexts.iter_mut() {
            if c.as_ref()
                .is_some_and(|cx| cx.ctl.is_empty() && cx.slots.iter().all(Option::is_none))
            {
                *c = None;
            }
        }
        let ep = &mut self.ep;
        let scratch = &mut self.scratch;
        self.orphans
            .retain(|o| !drain_orphan(ep, o.conn, o.addrs, scratch));
        moved
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

struct Step {
    moved: bool,
    /// The application closed it and all of its bytes and its FIN are
    /// handed to the endpoint: the slot can be freed.
    finished: bool,
}

/// Whether `conn` is still the connection `addrs` named (the endpoint
/// frees a connection once both FINs are acknowledged, and may give its
/// index to a new one).
fn same(ep: &Endpoint, conn: ConnIdx, addrs: Option<(SocketAddr, SocketAddr)>) -> bool {
    addrs.is_some() && ep.addresses(conn) == addrs
}

/// Reads an orphan to its end; true once it is done.
fn drain_orphan(
    ep: &mut Endpoint,
    conn: ConnIdx,
    addrs: Option<(SocketAddr, SocketAddr)>,
    scratch: &mut [u8],
) -> bool {
    if !same(ep, conn, addrs) {
        return true;
    }
    loop {
        match ep.recv(conn, scratch) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(ToeError::WouldBlock) => return false,
            Err(_) => {
                let _ = ep.close(conn);
                return true;
            }
        }
    }
}

fn serve_slot(ep: &mut Endpoint, shm: &Shm, i: usize, s: &mut Served, scratch: &mut [u8]) -> Step {
    let slot = shm.slot(i);
    let mut step = Step {
        moved: false,
        finished: false,
    };
    let state = SlotState::of(slot.state.load(Ordering::Relaxed));
    // The application went away (its process ended) before the open
    // completed: abandon it.
    if s.app_closed && state != SlotState::Established {
        let _ = ep.close(s.conn);
        s.rx_done = true;
        step.finished = true;
        return step;
    }
    match state {
        SlotState::Connecting => {
            if ep.is_established(s.conn) {
                s.addrs = ep.addresses(s.conn);
                copy_info(ep, slot, s.conn);
                shm.publish(i, s.addrs, SlotState::Established as u32);
                s.notice.readable();
            } else if let Err(e @ (ToeError::Refused | ToeError::TimedOut)) =
                ep.recv(s.conn, &mut [])
            {
                let ev = if matches!(e, ToeError::Refused) {
                    event::REFUSED
                } else {
                    event::TIMED_OUT
                };
                slot.events.fetch_or(ev, Ordering::Release);
                shm.publish(i, None, SlotState::Failed as u32);
                s.notice.readable();
            }
            return step;
        }
        SlotState::Established => {}
        _ => return step,
    }
    // Once our FIN is out the endpoint frees the connection by itself when
    // the peer's FIN came and every byte was read: that is the EOF.
    if s.fin_sent && !s.rx_done && !same(ep, s.conn, s.addrs) {
        s.rx_done = true;
        slot.events.fetch_or(event::EOF, Ordering::Release);
        s.notice.eof();
        step.moved = true;
    }
    let (rx, tx) = shm.rings(i);
    if !s.rx_done {
        let mut got = false;
        loop {
            let head = slot.rx_head.load(Ordering::Relaxed);
            let room = RING_SIZE - head.wrapping_sub(slot.rx_tail.load(Ordering::Acquire));
            // An application that closed reads nothing more: discard.
            let r = if s.app_closed {
                ep.recv(s.conn, scratch)
            } else if room == 0 {
                break;
            } else {
                // SAFETY: `room` bytes from the head are the producer's
                // (the application has consumed them).
                ep.recv(s.conn, unsafe { rx.slice_mut(head, room as usize) })
            };
            match r {
                Ok(0) => {
                    s.rx_done = true;
                    slot.events.fetch_or(event::EOF, Ordering::Release);
                    s.notice.eof();
                    got = true;
                    break;
                }
                Ok(n) => {
                    if !s.app_closed {
                        slot.rx_head
                            .store(head.wrapping_add(n as u32), Ordering::Release);
                    }
                    got = true;
                }
                Err(ToeError::WouldBlock) => break,
                Err(_) => {
                    s.rx_done = true;
                    slot.events.fetch_or(event::RESET, Ordering::Release);
                    s.notice.reset();
                    got = true;
                    break;
                }
            }
        }
        step.moved |= got;
    }
    arm_readable(slot, &s.notice);
    let reset = slot.events.load(Ordering::Relaxed) & event::RESET != 0;
    let tail = slot.tx_tail.load(Ordering::Relaxed);
    let queued = slot.tx_head.load(Ordering::Acquire).wrapping_sub(tail);
    if queued > 0 && !reset && !s.fin_sent {
        // SAFETY: `queued` bytes from the tail are the application's
        // published bytes, not written again until the tail passes them.
        if let Ok(n) = ep.send(s.conn, unsafe { tx.slice(tail, queued as usize) }) {
            slot.tx_tail
                .store(tail.wrapping_add(n as u32), Ordering::Release);
            step.moved = true;
        }
    }
    let drained = slot.tx_tail.load(Ordering::Relaxed) == slot.tx_head.load(Ordering::Acquire);
    let shut = s.app_closed || slot.app_flags.load(Ordering::Acquire) & app_flag::SHUT_WR != 0;
    unplug_writable(slot, &s.notice, shut || reset);
    if shut && drained && !s.fin_sent && !reset {
        let _ = ep.close(s.conn);
        s.fin_sent = true;
    }
    // Until the endpoint frees the connection (its index may then be
    // another's): the retransmissions of its last bytes count too.
    if !s.rx_done || !s.fin_sent || same(ep, s.conn, s.addrs) {
        copy_info(ep, slot, s.conn);
    }
    step.finished = s.app_closed && (s.fin_sent || reset);
    step
}

/// POLLIN while the RX ring holds bytes: the service's byte is written
/// whenever the application has cleared `rx_armed` (it does so before
/// reading the last one away), so no wake-up is lost (toe_app.h).
fn arm_readable(slot: &Slot, notice: &Notice) {
    let pending = slot.rx_ready() > 0;
    if pending && slot.rx_armed.swap(1, Ordering::SeqCst) == 0 {
        notice.readable();
    }
}

/// The Acked notice: a writer that found the TX ring full plugged its
/// descriptor and set WANT_TX; once a quarter of the ring is free again
/// (the data path took bytes the peer acknowledged), or writing is over
/// (shut down, reset), the plug is read away and the kernel wakes the
/// writer with POLLOUT. A quarter, as tcp_poll waits for a third of the
/// send buffer, so a writer wakes to write a useful amount.
fn unplug_writable(slot: &Slot, notice: &Notice, over: bool) {
    if slot.app_flags.load(Ordering::SeqCst) & app_flag::WANT_TX == 0 {
        return;
    }
    let used = slot
        .tx_head
        .load(Ordering::Acquire)
        .wrapping_sub(slot.tx_tail.load(Ordering::Relaxed));
    if over || RING_SIZE - used >= RING_SIZE / 4 {
        slot.app_flags
            .fetch_and(!app_flag::WANT_TX, Ordering::SeqCst);
        notice.writable();
    }
}

/// The data path's and the control plane's state, for TCP_INFO.
fn copy_info(ep: &Endpoint, slot: &super::layout::Slot, conn: ConnIdx) {
    if let Some(info) = ep.tcp_info(conn) {
        slot.snd_una.store(info.snd_una, Ordering::Relaxed);
        slot.snd_nxt.store(info.snd_nxt, Ordering::Relaxed);
        slot.rcv_nxt.store(info.rcv_nxt, Ordering::Relaxed);
        slot.rcv_wnd.store(info.rcv_wnd, Ordering::Relaxed);
        slot.snd_mss.store(info.snd_mss, Ordering::Relaxed);
        slot.retrans.store(info.retrans, Ordering::Relaxed);
        slot.lost.store(info.lost, Ordering::Relaxed);
        slot.sacked.store(info.sacked, Ordering::Relaxed);
        slot.reordering.store(info.reordering, Ordering::Relaxed);
        slot.total_retrans
            .store(info.total_retrans, Ordering::Relaxed);
        // One count for both: see `TcpInfo::backoff`.
        slot.backoffs.store(info.retransmits, Ordering::Relaxed);
    }
    if let Some(flow) = ep.flow_info(conn) {
        let policy = match flow.congestion {
            "reno" => c::TOE_CC_RENO,
            "dctcp" => c::TOE_CC_DCTCP,
            _ => c::TOE_CC_NONE,
        };
        slot.snd_cwnd.store(flow.cwnd, Ordering::Relaxed);
        slot.srtt_us
            .store(flow.srtt_us.unwrap_or(0), Ordering::Relaxed);
        slot.congestion.store(policy, Ordering::Relaxed);
    }
}

fn response(i: usize, addrs: Option<(SocketAddr, SocketAddr)>) -> Response {
    let mut r = Response {
        id: i as u32,
        ..Response::default()
    };
    if let Some((l, p)) = addrs {
        r.addrs = Addresses::of(l, p);
    }
    r
}

fn reply_err(fd: &OwnedFd, errno: i32) {
    let resp = Response {
        err: errno,
        ..Response::default()
    };
    let _ = ctl::send_response(fd, &resp, &[]);
}

fn errno(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

const _: () = assert!(c::TOE_SLOTS as usize == SLOTS);

/// A service running on its own thread.
pub struct ServiceHandle {
    stop: std::sync::Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<crate::Counters, ToeError>>,
}

impl Service {
    /// Runs the service on a new thread until [`ServiceHandle::stop`].
    pub fn spawn(mut self) -> ServiceHandle {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("toe-service".into())
            .spawn(move || {
                self.run(&flag)?;
                Ok(self.ep.counters())
            })
            .expect("spawning a thread");
        ServiceHandle { stop, thread }
    }
}

impl ServiceHandle {
    /// Whether the service stopped by itself (an error of the port).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Stops the service; returns the endpoint's counters.
    pub fn stop(self) -> Result<crate::Counters, ToeError> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| ToeError::Config("the toe service thread panicked".into()))?
    }
}

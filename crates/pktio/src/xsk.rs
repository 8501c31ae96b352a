//! One AF_XDP socket with its own UMEM and four rings
//! (Documentation/networking/af_xdp.rst): the fill and RX rings carry the
//! receive frames around, the TX and completion rings the transmit frames.
//! All `unsafe` of the AF_XDP backend (mmap, socket options, the rings) is
//! here.
//!
//! The UMEM holds `2 * ring` frames of `frame_size` bytes: the first `ring`
//! circulate between the fill ring, the kernel and the RX ring, the rest
//! between the free list, the TX ring and the completion ring. Each ring has
//! `ring` entries, so the fill ring can always take back every RX frame.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::PktIoError;

/// Size of one RX/TX descriptor (`struct xdp_desc`) and one fill or
/// completion entry (a UMEM address).
const DESC: usize = std::mem::size_of::<libc::xdp_desc>();
const ADDR: usize = std::mem::size_of::<u64>();

/// An anonymous or socket mapping, unmapped on drop.
struct Mmap {
    ptr: *mut u8,
    len: usize,
}

impl Mmap {
    fn new(fd: Option<RawFd>, len: usize, offset: u64, what: &str) -> Result<Mmap, PktIoError> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd),
            None => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            ),
        };
        // SAFETY: a fresh mapping of `len` bytes; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(PktIoError::io(
                format!("mmap {what}"),
                io::Error::last_os_error(),
            ));
        }
        Ok(Mmap {
            ptr: ptr.cast(),
            len,
        })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// One mapped ring: producer and consumer indexes, flags, descriptors.
/// Indexes run freely and wrap; `mask` picks the slot.
struct Ring {
    map: Mmap,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    mask: u32,
}

impl Ring {
    fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        entries: u32,
        size: usize,
        pgoff: u64,
        what: &str,
    ) -> Result<Ring, PktIoError> {
        let len = off.desc as usize + entries as usize * size;
        Ok(Ring {
            map: Mmap::new(Some(fd), len, pgoff, what)?,
            producer: off.producer as usize,
            consumer: off.consumer as usize,
            flags: off.flags as usize,
            desc: off.desc as usize,
            mask: entries - 1,
        })
    }

    fn word(&self, at: usize) -> &AtomicU32 {
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS and lie inside the
        // mapping; the kernel aligns them to 4 bytes (or more).
        unsafe { &*(self.map.ptr.add(at) as *const AtomicU32) }
    }

    fn producer(&self) -> &AtomicU32 {
        self.word(self.producer)
    }

    fn consumer(&self) -> &AtomicU32 {
        self.word(self.consumer)
    }

    fn needs_wakeup(&self) -> bool {
        self.word(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// The address of entry `index` (taken modulo the ring).
    fn slot(&self, index: u32, size: usize) -> *mut u8 {
        // SAFETY: (index & mask) < entries, so the slot lies in the mapping.
        unsafe {
            self.map
                .ptr
                .add(self.desc + (index & self.mask) as usize * size)
        }
    }
}

/// What the kernel counted for one socket (`XDP_STATISTICS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, derive_more::AddAssign)]
pub struct XskStats {
    /// Frames dropped for other reasons than a full RX ring (no frame in
    /// the fill ring, a frame larger than a chunk).
    pub rx_dropped: u64,
    /// Frames dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring had no frame for the kernel.
    pub rx_fill_ring_empty: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
}

/// An AF_XDP socket bound to one RX queue of one device.
pub(crate) struct Xsk {
    fd: OwnedFd,
    umem: Mmap,
    fill: Ring,
    completion: Ring,
    rx: Ring,
    tx: Ring,
    frame_size: u32,
    /// UMEM addresses of the transmit frames not in flight.
    free_tx: Vec<u64>,
    zero_copy: bool,
}

// SAFETY: the mappings are owned by this value and used through `&mut
// self` only; the kernel side synchronizes through the rings' producer and
// consumer words (acquire/release below).
unsafe impl Send for Xsk {}

fn setsockopt<T>(fd: RawFd, name: i32, value: &T, what: &str) -> Result<(), PktIoError> {
    crate::sys::setsockopt(fd, libc::SOL_XDP, name, value, what)
}

fn getsockopt<T>(fd: RawFd, name: i32, value: &mut T, what: &str) -> Result<(), PktIoError> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: value and len are valid out-parameters of T's size.
    let rc =
        unsafe { libc::getsockopt(fd, libc::SOL_XDP, name, (value as *mut T).cast(), &mut len) };
    if rc != 0 {
        return Err(PktIoError::io(
            format!("getsockopt {what}"),
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

impl Xsk {
    /// A socket on queue `queue` of `ifindex` (in the calling thread's
    /// network namespace), rings of `ring` entries (a power of two),
    /// chunks of `frame_size` bytes (a power of two, 2048..=page size).
    /// Zero-copy where the driver offers it, else copy mode. A queue the
    /// device does not have fails with `EINVAL`.
    pub(crate) fn open(
        ifindex: u32,
        queue: u32,
        ring: u32,
        frame_size: u32,
    ) -> Result<Xsk, PktIoError> {
        // SAFETY: plain socket(2); owned below.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(PktIoError::io("socket(AF_XDP)", io::Error::last_os_error()));
        }
        // SAFETY: raw is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let frames = 2 * ring;
        let umem = Mmap::new(None, frames as usize * frame_size as usize, 0, "the UMEM")?;
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr as u64,
            len: umem.len as u64,
            chunk_size: frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        let raw = fd.as_raw_fd();
        setsockopt(raw, libc::XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
        let entries = ring as libc::c_int;
        for (opt, what) in [
            (libc::XDP_UMEM_FILL_RING, "XDP_UMEM_FILL_RING"),
            (libc::XDP_UMEM_COMPLETION_RING, "XDP_UMEM_COMPLETION_RING"),
            (libc::XDP_RX_RING, "XDP_RX_RING"),
            (libc::XDP_TX_RING, "XDP_TX_RING"),
        ] {
            setsockopt(raw, opt, &entries, what)?;
        }
        // SAFETY: plain data; zero is valid.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        getsockopt(raw, libc::XDP_MMAP_OFFSETS, &mut off, "XDP_MMAP_OFFSETS")?;
        let rx = Ring::map(raw, &off.rx, ring, DESC, 0, "the RX ring")?;
        let tx = Ring::map(
            raw,
            &off.tx,
            ring,
            DESC,
            libc::XDP_PGOFF_TX_RING as u64,
            "the TX ring",
        )?;
        let fill = Ring::map(
            raw,
            &off.fr,
            ring,
            ADDR,
            libc::XDP_UMEM_PGOFF_FILL_RING,
            "the fill ring",
        )?;
        let completion = Ring::map(
            raw,
            &off.cr,
            ring,
            ADDR,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            "the completion ring",
        )?;
        bind(raw, ifindex, queue)?;
        let mut xsk = Xsk {
            fd,
            umem,
            fill,
            completion,
            rx,
            tx,
            frame_size,
            free_tx: (ring..frames)
                .map(|i| u64::from(i) * u64::from(frame_size))
                .collect(),
            zero_copy: false,
        };
        xsk.zero_copy = xsk.query_zero_copy()?;
        let rx_frames: Vec<u64> = (0..ring)
            .map(|i| u64::from(i) * u64::from(frame_size))
            .collect();
        xsk.give_to_fill(&rx_frames);
        Ok(xsk)
    }

    fn query_zero_copy(&self) -> Result<bool, PktIoError> {
        let mut opts = libc::xdp_options { flags: 0 };
        getsockopt(
            self.fd.as_raw_fd(),
            libc::XDP_OPTIONS,
            &mut opts,
            "XDP_OPTIONS",
        )?;
        Ok(opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
    }

    pub(crate) fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Puts frames (UMEM chunk addresses) on the fill ring. The ring has an
    /// entry for every receive frame, so there is always room.
    fn give_to_fill(&mut self, addrs: &[u64]) {
        let prod = self.fill.producer().load(Ordering::Relaxed);
        for (i, &addr) in addrs.iter().enumerate() {
            let slot = self.fill.slot(prod.wrapping_add(i as u32), ADDR) as *mut u64;
            // SAFETY: the slot is in the mapping and ours until the producer
            // index passes it.
            unsafe { slot.write(addr) };
        }
        self.fill
            .producer()
            .store(prod.wrapping_add(addrs.len() as u32), Ordering::Release);
    }

    /// Whether the RX ring has a frame (no syscall).
    pub(crate) fn has_frames(&self) -> bool {
        let prod = self.rx.producer().load(Ordering::Acquire);
        prod != self.rx.consumer().load(Ordering::Relaxed)
    }

    /// Hands each received frame (at most `max`) to `f` and gives its chunk
    /// back to the fill ring; returns how many.
    pub(crate) fn recv(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let prod = self.rx.producer().load(Ordering::Acquire);
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        let n = (prod.wrapping_sub(cons) as usize).min(max);
        let mut chunks = [0u64; 64];
        let mut done = 0;
        while done < n {
            let batch = (n - done).min(chunks.len());
            for (i, chunk) in chunks.iter_mut().take(batch).enumerate() {
                let at = cons.wrapping_add((done + i) as u32);
                // SAFETY: entries between consumer and producer are written
                // by the kernel before it published the producer (acquire).
                let desc = unsafe { (self.rx.slot(at, DESC) as *const libc::xdp_desc).read() };
                let (addr, len) = (desc.addr as usize, desc.len as usize);
                if addr + len <= self.umem.len {
                    // SAFETY: bounds checked against the UMEM just above; the
                    // chunk is ours until it is back on the fill ring.
                    f(unsafe { std::slice::from_raw_parts(self.umem.ptr.add(addr), len) });
                }
                *chunk = desc.addr & !(u64::from(self.frame_size) - 1);
            }
            self.give_to_fill(&chunks[..batch]);
            done += batch;
        }
        self.rx
            .consumer()
            .store(cons.wrapping_add(n as u32), Ordering::Release);
        if n > 0 && self.fill.needs_wakeup() {
            self.kick_rx();
        }
        n
    }

    /// Wakes the driver to take frames from the fill ring
    /// (`XDP_USE_NEED_WAKEUP`).
    fn kick_rx(&self) {
        // SAFETY: a zero-length recvfrom is AF_XDP's wake-up call.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Takes back the transmit frames the kernel has completed.
    fn reap_completions(&mut self) {
        let prod = self.completion.producer().load(Ordering::Acquire);
        let cons = self.completion.consumer().load(Ordering::Relaxed);
        let n = prod.wrapping_sub(cons);
        for i in 0..n {
            let slot = self.completion.slot(cons.wrapping_add(i), ADDR) as *const u64;
            // SAFETY: published by the kernel before the producer index.
            self.free_tx.push(unsafe { slot.read() });
        }
        self.completion.consumer().store(prod, Ordering::Release);
    }

    /// Queues `frames` for transmit (copying each into a free frame) and
    /// kicks the kernel; returns (queued, refused, bytes queued). A frame
    /// larger than a chunk is refused; so is every frame left when no
    /// transmit frame came free after a kick (the device pushes back), as
    /// a full socket buffer refuses them on the AF_PACKET backend.
    pub(crate) fn send<B: AsRef<[u8]>>(
        &mut self,
        frames: &[B],
    ) -> Result<(usize, usize, u64), PktIoError> {
        self.reap_completions();
        let (mut queued, mut refused, mut bytes) = (0usize, 0usize, 0u64);
        for (i, frame) in frames.iter().enumerate() {
            let frame = frame.as_ref();
            if frame.len() > self.frame_size as usize {
                refused += 1;
                continue;
            }
            if self.free_tx.is_empty() {
                self.kick_tx()?;
            }
            let Some(addr) = self.free_tx.pop() else {
                refused += frames.len() - i;
                break;
            };
            self.push_tx(addr, frame);
            queued += 1;
            bytes += frame.len() as u64;
        }
        self.kick_tx()?;
        Ok((queued, refused, bytes))
    }

    /// Copies `frame` into the free chunk at `addr` and publishes it on the
    /// TX ring. The ring has an entry for every transmit frame, so there is
    /// room.
    fn push_tx(&mut self, addr: u64, frame: &[u8]) {
        let prod = self.tx.producer().load(Ordering::Relaxed);
        // SAFETY: addr is a free transmit chunk of frame_size bytes inside
        // the UMEM and the frame fits (the caller checked); the TX slot is
        // ours until the producer index passes it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.umem.ptr.add(addr as usize),
                frame.len(),
            );
            (self.tx.slot(prod, DESC) as *mut libc::xdp_desc).write(libc::xdp_desc {
                addr,
                len: frame.len() as u32,
                options: 0,
            });
        }
        self.tx
            .producer()
            .store(prod.wrapping_add(1), Ordering::Release);
    }

    /// Makes the kernel transmit what the TX ring holds. In copy mode the
    /// kernel sends a bounded batch per call (and says EAGAIN when more is
    /// left), so this calls until the ring is drained or the device pushes
    /// back.
    fn kick_tx(&mut self) -> Result<(), PktIoError> {
        let ring = self.tx.mask + 1;
        for _ in 0..ring {
            let prod = self.tx.producer().load(Ordering::Relaxed);
            if self.tx.consumer().load(Ordering::Acquire) == prod || !self.tx.needs_wakeup() {
                break;
            }
            // SAFETY: a zero-length sendto is AF_XDP's transmit call.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                    // The device's queue is full: leave the rest queued,
                    // the next send or recv kicks again.
                    Some(libc::EBUSY) | Some(libc::ENOBUFS) => break,
                    _ => return Err(PktIoError::io("AF_XDP transmit", e)),
                }
            }
        }
        self.reap_completions();
        Ok(())
    }

    pub(crate) fn stats(&self) -> Result<XskStats, PktIoError> {
        // SAFETY: plain data; zero is valid.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        getsockopt(
            self.fd.as_raw_fd(),
            libc::XDP_STATISTICS,
            &mut st,
            "XDP_STATISTICS",
        )?;
        Ok(XskStats {
            rx_dropped: st.rx_dropped,
            rx_ring_full: st.rx_ring_full,
            rx_fill_ring_empty: st.rx_fill_ring_empty_descs,
            rx_invalid_descs: st.rx_invalid_descs,
            tx_invalid_descs: st.tx_invalid_descs,
        })
    }
}

fn bind(fd: RawFd, ifindex: u32, queue: u32) -> Result<(), PktIoError> {
    let addr = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: libc::XDP_USE_NEED_WAKEUP,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: addr is a valid sockaddr_xdp for the call.
    let rc = unsafe {
        libc::bind(
            fd,
            (&addr as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(PktIoError::io(
            format!("bind AF_XDP to queue {queue}"),
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Creates the XDP link of program `prog` on `ifindex` (in the calling
/// thread's network namespace): attached while the returned descriptor is
/// open, so a process that dies leaves nothing behind.
pub(crate) fn xdp_link(prog: RawFd, ifindex: u32) -> io::Result<OwnedFd> {
    // SAFETY: no options (NULL); the call returns a new descriptor or
    // a negative errno.
    let rc = unsafe {
        libbpf_rs::libbpf_sys::bpf_link_create(
            prog,
            ifindex as i32,
            libbpf_rs::libbpf_sys::BPF_XDP,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    // SAFETY: rc is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(rc) })
}

/// An epoll instance watching `fds` for input: one descriptor that is
/// readable when any socket of a port is.
pub(crate) fn epoll_over(fds: &[RawFd]) -> io::Result<OwnedFd> {
    // SAFETY: plain epoll_create1; owned below.
    let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: raw is a fresh descriptor we own.
    let ep = unsafe { OwnedFd::from_raw_fd(raw) };
    for &fd in fds {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: ev is valid for the call.
        if unsafe { libc::epoll_ctl(raw, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(ep)
}

/// The interface index of `dev` in the calling thread's namespace.
pub(crate) fn ifindex(dev: &str) -> Option<u32> {
    let name = std::ffi::CString::new(dev).ok()?;
    // SAFETY: if_nametoindex reads a NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (i != 0).then_some(i)
}

//! A context's shared memory: a memfd mapped once for the header and the
//! slots, and each payload ring mapped twice back to back (thesis Fig. 5.7)
//! so a run of bytes that wraps around the ring's end is contiguous and is
//! copied with one memcpy.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering;

use super::layout::{
    c, rx_ring_offset, slot_offset, tx_ring_offset, Addresses, Header, Slot, RING_SIZE, SHM_SIZE,
    SLOTS,
};

/// A mapping, unmapped on drop.
struct Mapping {
    at: NonNull<u8>,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `at..at+len` is a mapping this value owns.
        unsafe { libc::munmap(self.at.as_ptr().cast(), self.len) };
    }
}

/// Maps `len` bytes of `fd` at `offset` (shared, read-write), at `fixed`
/// if given.
fn map(fd: &OwnedFd, offset: usize, len: usize, fixed: Option<*mut u8>) -> io::Result<*mut u8> {
    let flags = libc::MAP_SHARED | if fixed.is_some() { libc::MAP_FIXED } else { 0 };
    // SAFETY: a fresh shared mapping of our own memfd; MAP_FIXED only over
    // address space reserved by `Ring::map` for exactly this.
    let p = unsafe {
        libc::mmap(
            fixed.map_or(ptr::null_mut(), |p| p.cast()),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd.as_raw_fd(),
            offset as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// One payload ring, mapped twice: `base[i]` and `base[i + RING_SIZE]` are
/// the same byte.
pub struct Ring {
    map: Mapping,
}

impl Ring {
    fn map(fd: &OwnedFd, offset: usize) -> io::Result<Ring> {
        let size = RING_SIZE as usize;
        // Reserve twice the ring's size, then map the ring over each half.
        // SAFETY: an anonymous reservation, no access.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                2 * size,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p.cast::<u8>();
        let ring = Ring {
            map: Mapping {
                at: NonNull::new(base).expect("mmap does not return null"),
                len: 2 * size,
            },
        };
        map(fd, offset, size, Some(base))?;
        // SAFETY: within the reservation.
        map(fd, offset, size, Some(unsafe { base.add(size) }))?;
        Ok(ring)
    }

    /// `len` bytes from position `pos` (`len` at most the ring's size).
    ///
    /// # Safety
    /// The caller owns those bytes under the ring's single-producer,
    /// single-consumer protocol (no one writes them meanwhile).
    pub unsafe fn slice(&self, pos: u32, len: usize) -> &[u8] {
        debug_assert!(len <= RING_SIZE as usize);
        let at = (pos & (RING_SIZE - 1)) as usize;
        std::slice::from_raw_parts(self.map.at.as_ptr().add(at), len)
    }

    /// `len` writable bytes from position `pos`.
    ///
    /// # Safety
    /// As for [`Ring::slice`], and no other slice of them is alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, pos: u32, len: usize) -> &mut [u8] {
        debug_assert!(len <= RING_SIZE as usize);
        let at = (pos & (RING_SIZE - 1)) as usize;
        std::slice::from_raw_parts_mut(self.map.at.as_ptr().add(at), len)
    }
}

/// A context's shared memory, mapped in this process.
pub struct Shm {
    fd: OwnedFd,
    header: Mapping,
    rings: Vec<(Ring, Ring)>,
}

// SAFETY: the mapping is shared memory accessed through atomics and the
// rings' SPSC protocol; the raw pointers do not tie it to a thread.
unsafe impl Send for Shm {}
unsafe impl Sync for Shm {}

impl Shm {
    /// A new context's memory: a memfd of the layout's size with its header
    /// written.
    pub fn create() -> io::Result<Shm> {
        // SAFETY: a constant, nul-terminated name.
        let raw = unsafe { libc::memfd_create(c"steer-toe".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just created and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: a valid descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), SHM_SIZE as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let shm = Shm::open(fd)?;
        // SAFETY: the header is ours alone until the fd is handed out.
        unsafe {
            shm.header_ptr().write(Header {
                magic: c::TOE_MAGIC,
                version: c::TOE_VERSION,
                slots: c::TOE_SLOTS,
                ring_size: c::TOE_RING_SIZE,
                reserved: [0; 48],
            })
        };
        Ok(shm)
    }

    /// Maps a context's memfd (the application's side: received from the
    /// service), checking its header.
    pub fn open(fd: OwnedFd) -> io::Result<Shm> {
        let head = c::TOE_RINGS_OFF as usize;
        let header = Mapping {
            at: NonNull::new(map(&fd, 0, head, None)?).expect("mmap does not return null"),
            len: head,
        };
        let mut rings = Vec::with_capacity(SLOTS);
        for i in 0..SLOTS {
            rings.push((
                Ring::map(&fd, rx_ring_offset(i))?,
                Ring::map(&fd, tx_ring_offset(i))?,
            ));
        }
        let shm = Shm { fd, header, rings };
        // SAFETY: mapped above; read once.
        let h = unsafe { shm.header_ptr().read() };
        // A fresh memfd reads zero here (the creator writes the header).
        if h.magic != 0
            && (h.magic != c::TOE_MAGIC
                || h.version != c::TOE_VERSION
                || h.slots != c::TOE_SLOTS
                || h.ring_size != c::TOE_RING_SIZE)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the shared memory's layout is not this program's (toe_app.h differs)",
            ));
        }
        Ok(shm)
    }

    fn header_ptr(&self) -> *mut Header {
        self.header.at.as_ptr().cast()
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Slot `i`'s shared fields.
    pub fn slot(&self, i: usize) -> &Slot {
        assert!(i < SLOTS);
        // SAFETY: in the mapping; a Slot is atomics (read and written
        // through shared references) and fields written only before the
        // state is published ([`Shm::publish`]).
        unsafe { &*self.header.at.as_ptr().add(slot_offset(i)).cast::<Slot>() }
    }

    /// Slot `i`'s RX and TX rings.
    pub fn rings(&self, i: usize) -> &(Ring, Ring) {
        &self.rings[i]
    }

    /// Resets slot `i` for a new connection (service side, while the slot is
    /// free and so not read by the application).
    pub fn reset(&self, i: usize) {
        let s = self.slot(i);
        for a in [
            &s.rx_head,
            &s.rx_tail,
            &s.tx_head,
            &s.tx_tail,
            &s.events,
            &s.app_flags,
            &s.snd_una,
            &s.snd_nxt,
            &s.rcv_nxt,
            &s.rcv_wnd,
            &s.snd_mss,
            &s.refs,
            &s.snd_cwnd,
            &s.srtt_us,
            &s.congestion,
            &s.rx_armed,
            &s.total_retrans,
            &s.backoffs,
            &s.retrans,
            &s.lost,
            &s.sacked,
            &s.reordering,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        for h in &s.holds {
            h.store(0, Ordering::Relaxed);
        }
    }

    /// Writes slot `i`'s addresses, then its state with release (service
    /// side; the application reads the addresses only after it saw the
    /// state).
    pub fn publish(
        &self,
        i: usize,
        addrs: Option<(std::net::SocketAddr, std::net::SocketAddr)>,
        state: u32,
    ) {
        if let Some((local, remote)) = addrs {
            let p = self.slot(i) as *const Slot as *mut Slot;
            // SAFETY: the application does not read these fields before it
            // sees the state stored below.
            unsafe {
                ptr::addr_of_mut!((*p).addrs).write(Addresses::of(local, remote));
            }
        }
        self.slot(i).state.store(state, Ordering::Release);
    }

    /// Slot `i`'s addresses (application side, after it saw the state
    /// published).
    pub fn addresses(&self, i: usize) -> (std::net::SocketAddr, std::net::SocketAddr) {
        let p = self.slot(i) as *const Slot;
        // SAFETY: written before the state was published with release.
        unsafe { ptr::addr_of!((*p).addrs).read() }.sockets()
    }
}

/// An address as the header stores it: 4 or 16 bytes in network order.
pub fn addr_bytes(ip: std::net::IpAddr) -> [u8; 16] {
    let mut b = [0u8; 16];
    match ip {
        std::net::IpAddr::V4(a) => b[..4].copy_from_slice(&a.octets()),
        std::net::IpAddr::V6(a) => b = a.octets(),
    }
    b
}

pub fn ip_of(family: u16, b: [u8; 16]) -> std::net::IpAddr {
    if family == 4 {
        std::net::IpAddr::from([b[0], b[1], b[2], b[3]])
    } else {
        std::net::IpAddr::from(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fig. 5.7: bytes written across a ring's end through one mapping are
    /// one contiguous run in another mapping of the same memfd (as the
    /// service and the application see it).
    #[test]
    fn a_run_across_the_ring_end_is_contiguous_in_both_mappings() {
        let service = Shm::create().unwrap();
        let app = Shm::open(service.fd().try_clone().unwrap()).unwrap();
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 13) as u8).collect();
        let pos = RING_SIZE - 300;
        // SAFETY: nothing else uses these rings.
        unsafe { service.rings(5).1.slice_mut(pos, data.len()) }.copy_from_slice(&data);
        // SAFETY: as above.
        let seen = unsafe { app.rings(5).1.slice(pos, data.len()) };
        assert_eq!(seen, &data[..]);
        // The wrapped part is at the ring's start, and nowhere else.
        // SAFETY: as above.
        let start = unsafe { app.rings(5).1.slice(0, 700) };
        assert_eq!(start, &data[300..]);
        // SAFETY: as above.
        assert!(unsafe { app.rings(4).1.slice(0, 700) }
            .iter()
            .all(|&b| b == 0));
        assert!(unsafe { app.rings(5).0.slice(0, 700) }
            .iter()
            .all(|&b| b == 0));
    }

    #[test]
    fn addresses_and_state_cross_the_mapping() {
        let service = Shm::create().unwrap();
        let app = Shm::open(service.fd().try_clone().unwrap()).unwrap();
        let local: std::net::SocketAddr = "10.1.2.3:80".parse().unwrap();
        let remote: std::net::SocketAddr = "[2001:db8::1]:49152".parse().unwrap();
        service.publish(7, Some((local, "10.9.9.9:5".parse().unwrap())), 2);
        assert_eq!(app.slot(7).state.load(Ordering::Acquire), 2);
        assert_eq!(app.addresses(7).0, local);
        service.publish(8, Some((remote, remote)), 2);
        assert_eq!(app.addresses(8), (remote, remote));
    }

    #[test]
    fn a_memfd_of_another_layout_is_refused() {
        let service = Shm::create().unwrap();
        // SAFETY: the header is written through the service's mapping only.
        unsafe { (*service.header_ptr()).ring_size = 4096 };
        let e = Shm::open(service.fd().try_clone().unwrap())
            .err()
            .expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}

//! The shared-memory lease table: ports the allocator has planned ahead per
//! destination, which the LD_PRELOAD shim claims with one compare-and-swap
//! instead of a round trip on the socket. The layout is
//! `lease_table.h` (shared with the shim's C; the constants below are
//! pinned against it by the binder's build), documented in docs/binders.md.
//!
//! The allocator is the only writer of ports: it fills a region's slots
//! with a plan (FREE), takes unclaimed ones back before it plans again, and
//! turns CLAIMED ones into ordinary leases, so every port is either offered
//! in exactly one slot, or leased, never both. All of it runs under the
//! allocator's state lock. This is the one module of srap with `unsafe`:
//! the mapping is raw memory shared with other processes, accessed only
//! through atomics at offsets checked against the header.

use std::fs::OpenOptions;
use std::io;
use std::mem::{offset_of, size_of};
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rss::L4Proto;

use crate::plan::PlanEntry;
use crate::ports::PortSet;

pub const LT_SUFFIX: &str = ".leases";
pub const LT_MAGIC: u32 = 0x544c_5453;
pub const LT_VERSION: u32 = 1;
pub const LT_REGIONS: usize = 64;
pub const LT_SLOTS: usize = 16;
pub const LT_STALE_MS: u64 = 1000;
pub const LT_HEARTBEAT_MS: u64 = 100;
pub const LT_WAKE_SLOT: usize = 8;
pub const LT_STATE_EMPTY: u64 = 0;
pub const LT_STATE_FREE: u64 = 1;
pub const LT_STATE_CLAIMED: u64 = 2;
pub const LT_PORT_SHIFT: u32 = 8;
pub const LT_GEN_SHIFT: u32 = 24;
pub const LT_FAMILY_V4: u8 = 4;
pub const LT_FAMILY_V6: u8 = 6;
pub const LT_PROTO_TCP: u8 = 6;
pub const LT_HEADER_SIZE: usize = 64;
pub const LT_REGION_KEY_SIZE: usize = 64;
pub const LT_SLOT_SIZE: usize = 16;
pub const LT_REGION_SIZE: usize = 320;
pub const LT_FILE_SIZE: usize = 20544;

/// `struct lt_header` of lease_table.h.
#[repr(C)]
pub struct LtHeader {
    pub magic: u32,
    pub version: u32,
    pub regions: u32,
    pub slots: u32,
    pub heartbeat_ms: u64,
    pub claims: u32,
    pub pad0: u32,
    pub reserved: [u8; 32],
}

/// `struct lt_region_key` of lease_table.h.
#[repr(C)]
pub struct LtRegionKey {
    pub seq: u64,
    pub family: u8,
    pub proto: u8,
    pub remote_port: u16,
    pub pad0: u32,
    pub local: [u8; 16],
    pub remote: [u8; 16],
    pub reserved: [u8; 16],
}

/// `struct lt_slot` of lease_table.h.
#[repr(C)]
pub struct LtSlot {
    pub word: u64,
    pub queue: u32,
    pub cpu: u32,
}

/// `struct lt_region` of lease_table.h.
#[repr(C)]
pub struct LtRegion {
    pub key: LtRegionKey,
    pub slots: [LtSlot; LT_SLOTS],
}

const _: () = {
    assert!(size_of::<LtHeader>() == LT_HEADER_SIZE);
    assert!(size_of::<LtRegionKey>() == LT_REGION_KEY_SIZE);
    assert!(size_of::<LtSlot>() == LT_SLOT_SIZE);
    assert!(size_of::<LtRegion>() == LT_REGION_SIZE);
    assert!(LT_HEADER_SIZE + LT_REGIONS * LT_REGION_SIZE == LT_FILE_SIZE);
    assert!(offset_of!(LtHeader, heartbeat_ms) == 16);
    assert!(offset_of!(LtHeader, claims) == 24);
    assert!(offset_of!(LtRegionKey, local) == 16);
    assert!(offset_of!(LtRegionKey, remote) == 32);
    assert!(LT_SLOTS * LT_SLOT_SIZE + LT_REGION_KEY_SIZE == LT_REGION_SIZE);
    assert!(LT_WAKE_SLOT > 0 && LT_WAKE_SLOT < LT_SLOTS);
};

/// The table file for the allocator socket `socket`.
pub fn table_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(LT_SUFFIX);
    PathBuf::from(name)
}

/// CLOCK_MONOTONIC in ms, the clock of the heartbeat (one per boot, the
/// same in every process).
pub fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// The table file, mapped shared.
pub struct Mapping {
    base: NonNull<u8>,
    path: PathBuf,
}

// SAFETY: the mapping is only accessed through atomics.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Creates the table at `path` (a fresh file renamed over any old one,
    /// so shims still mapping a dead allocator's table keep their old,
    /// stale pages and see the new file only when they map it again).
    pub fn create(path: &Path) -> io::Result<Self> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".{}.tmp", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        let made = (|| {
            file.set_permissions(std::fs::Permissions::from_mode(0o666))?;
            file.set_len(LT_FILE_SIZE as u64)?;
            // SAFETY: a fresh shared mapping of a file of LT_FILE_SIZE bytes.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    LT_FILE_SIZE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let base = NonNull::new(ptr.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
            Ok(Mapping {
                base,
                path: path.to_path_buf(),
            })
        })();
        let mapping = match made {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        mapping
            .u32_at(offset_of!(LtHeader, version))
            .store(LT_VERSION, Ordering::Relaxed);
        mapping
            .u32_at(offset_of!(LtHeader, regions))
            .store(LT_REGIONS as u32, Ordering::Relaxed);
        mapping
            .u32_at(offset_of!(LtHeader, slots))
            .store(LT_SLOTS as u32, Ordering::Relaxed);
        mapping.heartbeat();
        mapping
            .u32_at(offset_of!(LtHeader, magic))
            .store(LT_MAGIC, Ordering::Release);
        if let Err(e) = std::fs::rename(&tmp, path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(mapping)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn u32_at(&self, offset: usize) -> &AtomicU32 {
        assert!(offset.is_multiple_of(4) && offset + 4 <= LT_FILE_SIZE);
        // SAFETY: in bounds and aligned (mmap returns page-aligned memory);
        // the mapping lives as long as &self.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }

    fn u64_at(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= LT_FILE_SIZE);
        // SAFETY: as in u32_at.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }

    fn region_offset(region: usize) -> usize {
        LT_HEADER_SIZE + region * LT_REGION_SIZE
    }

    fn slot_offset(region: usize, slot: usize) -> usize {
        Self::region_offset(region) + offset_of!(LtRegion, slots) + slot * LT_SLOT_SIZE
    }

    fn word(&self, region: usize, slot: usize) -> &AtomicU64 {
        self.u64_at(Self::slot_offset(region, slot) + offset_of!(LtSlot, word))
    }

    /// Writes the heartbeat: shims trust the table only while it is fresh.
    pub fn heartbeat(&self) {
        self.u64_at(offset_of!(LtHeader, heartbeat_ms))
            .store(monotonic_ms(), Ordering::Release);
    }

    /// Marks the table dead (the allocator is stopping): shims stop using
    /// it at once rather than after [`LT_STALE_MS`].
    pub fn retire(&self) {
        self.u64_at(offset_of!(LtHeader, heartbeat_ms))
            .store(0, Ordering::Release);
    }

    /// The claim counter shims bump.
    pub fn claims(&self) -> u32 {
        self.u32_at(offset_of!(LtHeader, claims))
            .load(Ordering::Acquire)
    }

    /// Sleeps until a shim bumps the claim counter past `seen` (FUTEX_WAKE
    /// on the shared word), or `timeout`.
    pub fn wait_claims(&self, seen: u32, timeout: Duration) {
        let word = self.u32_at(offset_of!(LtHeader, claims));
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: FUTEX_WAIT (shared, not PRIVATE: shims in other processes
        // wake it) on a live aligned u32; returns at once if it is not `seen`.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT,
                seen,
                &ts as *const libc::timespec,
                std::ptr::null::<u32>(),
                0u32,
            );
        }
    }

    /// Rewrites region `region`'s key under its sequence number.
    fn write_key(&self, region: usize, key: Option<&RegionKey>) {
        let base = Self::region_offset(region);
        let seq = self.u64_at(base + offset_of!(LtRegionKey, seq));
        let s = seq.load(Ordering::Relaxed);
        seq.store(s | 1, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        let mut bytes = [0u8; LT_REGION_KEY_SIZE - 8];
        if let Some(key) = key {
            bytes[0] = key.family();
            bytes[1] = LT_PROTO_TCP;
            bytes[2..4].copy_from_slice(&key.remote_port.to_le_bytes());
            let l = offset_of!(LtRegionKey, local) - 8;
            let r = offset_of!(LtRegionKey, remote) - 8;
            bytes[l..l + 16].copy_from_slice(&address_bytes(key.local));
            bytes[r..r + 16].copy_from_slice(&address_bytes(key.remote));
        }
        for (i, chunk) in bytes.chunks_exact(8).enumerate() {
            let v = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            self.u64_at(base + 8 + i * 8).store(v, Ordering::Relaxed);
        }
        seq.store((s | 1).wrapping_add(1), Ordering::Release);
    }

    fn write_slot(&self, region: usize, slot: usize, word: u64, queue: u32, cpu: u32) {
        let off = Self::slot_offset(region, slot);
        self.u32_at(off + offset_of!(LtSlot, queue))
            .store(queue, Ordering::Relaxed);
        self.u32_at(off + offset_of!(LtSlot, cpu))
            .store(cpu, Ordering::Relaxed);
        self.word(region, slot).store(word, Ordering::Release);
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in create, unmapped once.
        unsafe { libc::munmap(self.base.as_ptr().cast(), LT_FILE_SIZE) };
    }
}

/// 16 bytes, network order, IPv4 in the first 4.
fn address_bytes(addr: IpAddr) -> [u8; 16] {
    let mut out = [0u8; 16];
    match addr {
        IpAddr::V4(a) => out[..4].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => out = a.octets(),
    }
    out
}

/// The destination a region plans for (TCP only: the shim steers TCP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegionKey {
    pub local: IpAddr,
    pub remote: IpAddr,
    pub remote_port: u16,
}

impl RegionKey {
    fn family(&self) -> u8 {
        if self.remote.is_ipv4() {
            LT_FAMILY_V4
        } else {
            LT_FAMILY_V6
        }
    }
}

fn pack(state: u64, port: u16, generation: u64) -> u64 {
    state | (u64::from(port) << LT_PORT_SHIFT) | (generation << LT_GEN_SHIFT)
}

fn claimed(word: u64) -> u64 {
    (word & !0xff) | LT_STATE_CLAIMED
}

/// A port the allocator put in a slot.
#[derive(Debug, Clone, Copy)]
pub struct Offer {
    word: u64,
    pub port: u16,
    pub queue: u32,
    pub cpu: u32,
}

struct Region {
    key: RegionKey,
    slots: [Option<Offer>; LT_SLOTS],
    /// When it was last planned, and last claimed from or leased for.
    planned: Instant,
    used: Instant,
}

/// What the allocator knows of its table: which regions plan for which
/// destination and what it offered in each slot. The file is writable by
/// every local user, so the allocator trusts only its own records: a slot
/// counts as claimed only if it holds exactly the claimed form of the word
/// the allocator wrote.
pub struct Book {
    map: std::sync::Arc<Mapping>,
    regions: Vec<Option<Region>>,
    /// Every port offered in some slot.
    offered: PortSet,
    /// The next generation (starts random, so a shim that still maps a
    /// previous allocator's table never matches a word of this one).
    generation: u64,
}

/// Counts of what happened to the table, for benchmarks and `status`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TableStats {
    /// Claims turned into leases.
    pub claims: u64,
    /// Unclaimed offers taken back before a new plan.
    pub taken_back: u64,
    /// Leases asked for on the socket (round trips) while the table existed.
    pub round_trips: u64,
    /// Slots holding a word the allocator did not write (released, and the
    /// port leased until the sweep finds no socket).
    pub foreign: u64,
}

impl Book {
    pub fn new(map: std::sync::Arc<Mapping>) -> Self {
        let generation = rand::random::<u64>() >> (LT_GEN_SHIFT + 1);
        Book {
            map,
            regions: (0..LT_REGIONS).map(|_| None).collect(),
            offered: PortSet::new(),
            generation,
        }
    }

    pub fn mapping(&self) -> &std::sync::Arc<Mapping> {
        &self.map
    }

    /// Every port offered in a slot (never to be leased or offered again
    /// until taken back).
    pub fn offered(&self) -> &PortSet {
        &self.offered
    }

    fn next_word(&mut self, state: u64, port: u16) -> u64 {
        self.generation = (self.generation + 1) & ((1 << (64 - LT_GEN_SHIFT)) - 1);
        pack(state, port, self.generation)
    }

    pub fn region_of(&self, key: &RegionKey) -> Option<usize> {
        self.regions
            .iter()
            .position(|r| r.as_ref().is_some_and(|r| r.key == *key))
    }

    /// Empties every slot of `region`: unclaimed offers are taken back
    /// (their CAS wins, so no shim can claim them after), claimed ones are
    /// returned for the caller to lease.
    pub fn take_back(&mut self, region: usize, stats: &mut TableStats) -> Vec<(RegionKey, Offer)> {
        let mut claims = Vec::new();
        let Some(mut r) = self.regions[region].take() else {
            return claims;
        };
        for slot in 0..LT_SLOTS {
            let Some(offer) = r.slots[slot].take() else {
                continue;
            };
            let empty = self.next_word(LT_STATE_EMPTY, 0);
            let word = self.map.word(region, slot);
            match word.compare_exchange(offer.word, empty, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => stats.taken_back += 1,
                Err(now) => {
                    // Claimed (or scribbled on): the port may be in use, so
                    // it becomes a lease either way.
                    if now == claimed(offer.word) {
                        stats.claims += 1;
                    } else {
                        stats.foreign += 1;
                    }
                    word.store(empty, Ordering::Release);
                    claims.push((r.key, offer));
                }
            }
            self.offered.remove(offer.port);
        }
        self.regions[region] = Some(r);
        claims
    }

    /// Empties the claimed slots of every region and returns their claims
    /// to lease; unclaimed offers stay where they are, so shims keep
    /// claiming in plan order meanwhile.
    pub fn collect_claims(&mut self, stats: &mut TableStats) -> Vec<(RegionKey, Offer)> {
        let mut claims = Vec::new();
        for region in 0..LT_REGIONS {
            for slot in 0..LT_SLOTS {
                let Some(key) = self.regions[region].as_ref().map(|r| r.key) else {
                    break;
                };
                let Some(offer) = self.regions[region].as_ref().and_then(|r| r.slots[slot]) else {
                    continue;
                };
                if self.map.word(region, slot).load(Ordering::Acquire) != claimed(offer.word) {
                    continue;
                }
                // Only the allocator writes a claimed slot.
                let empty = self.next_word(LT_STATE_EMPTY, 0);
                self.map.word(region, slot).store(empty, Ordering::Release);
                stats.claims += 1;
                self.offered.remove(offer.port);
                if let Some(r) = self.regions[region].as_mut() {
                    r.slots[slot] = None;
                    r.used = Instant::now();
                }
                claims.push((key, offer));
            }
        }
        claims
    }

    /// Regions to plan again: fewer than `min_free` offers left, or planned
    /// more than `max_age` ago.
    pub fn due(&self, max_age: Duration, min_free: usize) -> Vec<RegionKey> {
        let now = Instant::now();
        self.regions
            .iter()
            .flatten()
            .filter(|r| {
                now.duration_since(r.planned) >= max_age
                    || r.slots.iter().flatten().count() < min_free
            })
            .map(|r| r.key)
            .collect()
    }

    /// The region for `key`, assigning one if needed: an unused one, else
    /// the one used least recently (emptied first; its claims are returned
    /// to lease).
    pub fn assign(
        &mut self,
        key: RegionKey,
        stats: &mut TableStats,
    ) -> (usize, Vec<(RegionKey, Offer)>) {
        if let Some(i) = self.region_of(&key) {
            return (i, Vec::new());
        }
        let index = self
            .regions
            .iter()
            .position(Option::is_none)
            .or_else(|| (0..LT_REGIONS).min_by_key(|&i| self.regions[i].as_ref().map(|r| r.used)))
            .unwrap_or(0);
        let claims = self.take_back(index, stats);
        self.map.write_key(index, Some(&key));
        let now = Instant::now();
        self.regions[index] = Some(Region {
            key,
            slots: [None; LT_SLOTS],
            planned: now,
            used: now,
        });
        (index, claims)
    }

    /// Offers `entries` in `region`'s slots, in plan order (the shim
    /// claims the lowest free slot, so the plan's order is kept).
    /// The region must have been emptied with [`Self::take_back`].
    pub fn fill(&mut self, region: usize, entries: &[PlanEntry], used: bool) {
        let mut offers = [None; LT_SLOTS];
        for (slot, entry) in entries.iter().take(LT_SLOTS).enumerate() {
            let word = self.next_word(LT_STATE_FREE, entry.port);
            self.map
                .write_slot(region, slot, word, entry.queue, entry.cpu);
            self.offered.insert(entry.port);
            offers[slot] = Some(Offer {
                word,
                port: entry.port,
                queue: entry.queue,
                cpu: entry.cpu,
            });
        }
        if let Some(r) = self.regions[region].as_mut() {
            r.slots = offers;
            r.planned = Instant::now();
            if used {
                r.used = r.planned;
            }
        }
    }

    /// Empties and gives up the regions not used for `idle` (their ports
    /// go back to the pool); returns their claims to lease.
    pub fn expire(&mut self, idle: Duration, stats: &mut TableStats) -> Vec<(RegionKey, Offer)> {
        let now = Instant::now();
        let mut claims = Vec::new();
        for i in 0..LT_REGIONS {
            if self.regions[i]
                .as_ref()
                .is_some_and(|r| now.duration_since(r.used) >= idle)
            {
                claims.extend(self.take_back(i, stats));
                self.map.write_key(i, None);
                self.regions[i] = None;
            }
        }
        claims
    }

    /// Empties every region and marks the table dead.
    pub fn retire(&mut self, stats: &mut TableStats) -> Vec<(RegionKey, Offer)> {
        let mut claims = Vec::new();
        for i in 0..LT_REGIONS {
            claims.extend(self.take_back(i, stats));
            self.map.write_key(i, None);
            self.regions[i] = None;
        }
        self.map.retire();
        claims
    }
}

/// `proto` is the one the table serves.
pub fn serves(proto: L4Proto) -> bool {
    proto == L4Proto::Tcp
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};

    /// What the shim does (steer_preload.c, `table_claim`): the lowest FREE
    /// slot of the region, taken with one CAS.
    fn claim(map: &Mapping, region: usize) -> Option<u16> {
        for slot in 0..LT_SLOTS {
            let word = map.word(region, slot);
            let mut w = word.load(Ordering::Acquire);
            while w & 0xff == LT_STATE_FREE {
                match word.compare_exchange(w, claimed(w), Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return Some((w >> LT_PORT_SHIFT) as u16),
                    Err(now) => w = now,
                }
            }
        }
        None
    }

    fn entries(ports: std::ops::Range<u16>) -> Vec<PlanEntry> {
        ports
            .map(|port| PlanEntry {
                port,
                queue: 0,
                cpu: 0,
                hash: 0,
            })
            .collect()
    }

    /// Claimers racing the allocator's take-backs, claim collection and
    /// refills: every port a claimer got is reported to the allocator
    /// exactly once, and no port is claimed twice while offered once.
    #[test]
    fn racing_claims_are_each_leased_once() {
        let dir = std::env::temp_dir().join(format!("srap-lt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let map = Arc::new(Mapping::create(&dir.join("t.leases")).unwrap());
        let mut book = Book::new(map.clone());
        let mut stats = TableStats::default();
        let key = RegionKey {
            local: IpAddr::from([10, 0, 0, 1]),
            remote: IpAddr::from([10, 0, 0, 2]),
            remote_port: 5201,
        };
        let (region, _) = book.assign(key, &mut stats);
        let stop = Arc::new(AtomicBool::new(false));
        let got = Arc::new(Mutex::new(Vec::new()));
        let claimers: Vec<_> = (0..3)
            .map(|_| {
                let (map, stop, got) = (map.clone(), stop.clone(), got.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(p) = claim(&map, region) {
                            got.lock().unwrap().push(p);
                        }
                    }
                })
            })
            .collect();
        let mut leased = Vec::new();
        let mut next = 1024u16;
        for round in 0..3000 {
            // Fresh ports every plan, so a port claimed twice shows up.
            book.fill(region, &entries(next..next + LT_SLOTS as u16), true);
            next = next.wrapping_add(LT_SLOTS as u16).max(1024);
            if round % 2 == 0 {
                // Give the claimers a chance on a loaded machine (at most
                // 2 ms; the odd rounds take back while they race).
                let until = Instant::now() + Duration::from_millis(2);
                while map.word(region, 0).load(Ordering::Acquire) & 0xff == LT_STATE_FREE
                    && Instant::now() < until
                {
                    std::thread::yield_now();
                }
                leased.extend(
                    book.collect_claims(&mut stats)
                        .into_iter()
                        .map(|(_, o)| o.port),
                );
            }
            leased.extend(
                book.take_back(region, &mut stats)
                    .into_iter()
                    .map(|(_, o)| o.port),
            );
        }
        stop.store(true, Ordering::Relaxed);
        for c in claimers {
            c.join().unwrap();
        }
        let mut got = got.lock().unwrap().clone();
        got.sort_unstable();
        leased.sort_unstable();
        assert_eq!(got, leased, "claimed and leased differ");
        let distinct: HashSet<u16> = got.iter().copied().collect();
        // Ports wrap after 64k / 16 rounds; 3000 rounds stay below that.
        assert_eq!(distinct.len(), got.len(), "a port claimed twice");
        assert!(!got.is_empty(), "the claimers never won a race");
        assert_eq!(stats.foreign, 0);
        assert_eq!(stats.claims as usize, got.len());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! The SRPIC sorter: Listing 1 of "Sorting Reordered Packets with Interrupt
//! Coalescing" (Wu, Crawford, Mhashilkar, section 3.3), over descriptors.
//!
//! A receive loop calls [`Sorter::push`] for each packet it takes from the
//! ring, in ring order, and [`Sorter::end_batch`] when the ring is empty (the
//! end of interrupt coalescing). Both append the ids of packets to deliver
//! upward, in delivery order, to `out`. The sorter never sees a payload: a
//! packet is an id chosen by the caller (an index into its batch or ring)
//! plus a [`Descriptor`]. [`Sorter::sort_batch`] does a whole batch at once.
//!
//! Per flow (the 4-tuple) a *manager* holds `NextExp` and three lists:
//! - **Prev**: sorted, packets whose first sequence number is below `NextExp`;
//! - **Curr**: in sequence; the first packet of a block starts it, and every
//!   packet whose sequence number equals `NextExp` is appended and advances
//!   `NextExp` to its end (`seq + payload length`);
//! - **After**: sorted, packets above `NextExp`.
//!
//! A manager is flushed (Prev, then Curr, then After) when its packet count
//! reaches the block size; all managers are flushed when the number of
//! packets held since the last full flush reaches the ring size, and at the
//! end of every batch. Unsuitable packets ([`Descriptor::Pass`]) go up at once.
//!
//! Decisions (see docs/srpic.md):
//! - Comparisons with `NextExp` use serial-number arithmetic (RFC 1982), and
//!   Prev/After are sorted by the distance from the block's first sequence
//!   number, so a block that spans the 2^32 wrap sorts correctly.
//! - Insertion is stable: equal sequence numbers keep their arrival order.
//! - The block-size check runs after every held packet, the first of a block
//!   included. Listing 1 skips it for the first packet, which only matters for
//!   a block size of 1: there Listing 1 would form blocks of 2, here a block
//!   size of 1 means "no sorting", as in the paper's Table 1.
//! - Per-flow state is bounded by `max_flows`. A packet of a new flow that
//!   finds the table full is delivered at once (it holds nothing, so nothing
//!   is reordered) and counted in [`SorterStats::passed_table_full`].
//!   Managers are stateless across blocks; one that has not seen a packet for
//!   `idle_batches` batches is reclaimed at the end of a batch.
//! - Two opt-in deviations ([`SorterConfig::ordered`]): an unsuitable packet
//!   first flushes its own flow ([`UnsuitablePolicy::FlushFlowFirst`]), and a
//!   segment that repeats data already in Curr goes right after Curr instead
//!   of into Prev ([`DuplicatePolicy::AfterCurr`]). Listing 1 lets both kinds
//!   overtake earlier data of their flow; on the shared traces that creates
//!   more reordering than it removes (docs/srpic.md).
//! - Flush-all visits managers in the order they first held a packet since
//!   the previous flush-all, so flows come up roughly in arrival order.

use std::collections::HashMap;
use std::hash::Hash;

use serde::Serialize;

use crate::flow::{FlowKey, FxBuildHasher};
use crate::seq;

/// What the sorter keys its managers by: [`FlowKey`] (any address family,
/// what [`crate::wire`] parses) or [`crate::flow::FlowKeyV4`] (an IPv4
/// 4-tuple as raw words: a receive loop that has the header words builds it
/// without two `IpAddr`s, and it hashes and compares in two machine words).
pub trait SortKey: Copy + Eq + Hash {}

impl<K: Copy + Eq + Hash> SortKey for K {}

/// A TCP segment the sorter may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSegment<K = FlowKey> {
    pub flow: K,
    /// Sequence number of the first payload byte.
    pub seq: u32,
    /// Payload length in bytes.
    pub len: u32,
}

/// What the sorter needs to know about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Descriptor<K = FlowKey> {
    /// A segment suitable for SRPIC (see `wire::PacketInfo::suitability`).
    Hold(TcpSegment<K>),
    /// A packet to deliver at once; `flow` when it has a 4-tuple (used by
    /// [`UnsuitablePolicy::FlushFlowFirst`]).
    Pass { flow: Option<K> },
}

/// What to do with an unsuitable packet whose flow has packets held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnsuitablePolicy {
    /// Listing 1: deliver it at once, ahead of its flow's held packets.
    #[default]
    DeliverAtOnce,
    /// Deviation (opt-in): flush the flow's manager first, so a FIN or RST
    /// never overtakes the data before it.
    FlushFlowFirst,
}

/// Where a segment goes that is below `NextExp` but not below the block's
/// first sequence number: it repeats data already in Curr (a retransmission,
/// a zero-window probe, a repacketised overlap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DuplicatePolicy {
    /// Listing 1: into Prev, so it is delivered ahead of the whole block.
    #[default]
    Prev,
    /// Deviation (opt-in): into After's sorted position, i.e. right after
    /// Curr, where it arrived relative to the data it repeats.
    AfterCurr,
}

/// Sorter parameters. With the `clap` feature the sizes are also `steer
/// reorder sort`'s flags (the block size has no default there: a replay
/// names it); the policies come from a [`Variant`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SorterConfig {
    /// SRPIC BlockSize: a flow's manager is flushed at this many packets
    /// (paper default 32).
    #[cfg_attr(feature = "clap", arg(long = "block", value_name = "BLOCK"))]
    pub block_size: u32,
    /// Ring size (Ringbuffer_Size): all managers are flushed after this many
    /// held packets.
    #[cfg_attr(
        feature = "clap",
        arg(long = "ring", value_name = "RING", default_value_t = SorterConfig::default().ring_size)
    )]
    pub ring_size: u32,
    /// Most flows with a manager at once.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SorterConfig::default().max_flows))]
    pub max_flows: usize,
    /// A manager unused for this many batches is reclaimed.
    #[cfg_attr(feature = "clap", arg(skip = SorterConfig::default().idle_batches))]
    pub idle_batches: u32,
    #[cfg_attr(feature = "clap", arg(skip))]
    pub unsuitable: UnsuitablePolicy,
    #[cfg_attr(feature = "clap", arg(skip))]
    pub duplicates: DuplicatePolicy,
}

/// Which reading of Listing 1 a sorter follows: its unsuitable-packet and
/// duplicate policies (docs/srpic.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Variant {
    /// Listing 1 exactly.
    #[default]
    Paper,
    /// An unsuitable packet (FIN, URG, options…) first flushes its flow, and
    /// a segment repeating data already held (retransmission, window probe)
    /// goes after it rather than ahead of the block.
    Ordered,
}

impl SorterConfig {
    /// Listing 1 exactly (the default).
    pub fn paper() -> Self {
        SorterConfig::default()
    }

    /// Both opt-in deviations: never lets an unsuitable packet or a repeated
    /// segment overtake the data of its flow that arrived before it.
    pub fn ordered() -> Self {
        SorterConfig {
            unsuitable: UnsuitablePolicy::FlushFlowFirst,
            duplicates: DuplicatePolicy::AfterCurr,
            ..SorterConfig::default()
        }
    }
}

impl SorterConfig {
    /// These sizes with `variant`'s policies.
    pub fn with_variant(self, variant: Variant) -> Self {
        let preset = match variant {
            Variant::Paper => SorterConfig::paper(),
            Variant::Ordered => SorterConfig::ordered(),
        };
        SorterConfig {
            unsuitable: preset.unsuitable,
            duplicates: preset.duplicates,
            ..self
        }
    }
}

impl Default for SorterConfig {
    fn default() -> Self {
        SorterConfig {
            block_size: 32,
            ring_size: 512,
            max_flows: 4096,
            idle_batches: 64,
            unsuitable: UnsuitablePolicy::DeliverAtOnce,
            duplicates: DuplicatePolicy::Prev,
        }
    }
}

/// A configuration the sorter cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("block size must be at least 1")]
    ZeroBlockSize,
    #[error("ring size must be at least 1")]
    ZeroRingSize,
    #[error("max flows must be at least 1")]
    ZeroMaxFlows,
}

impl ConfigError {
    /// Never the environment: a sorter parameter is wrong.
    pub fn is_environment(&self) -> bool {
        false
    }

    /// Always bad input (CLI exit 2).
    pub fn is_bad_input(&self) -> bool {
        true
    }
}

/// Counters, cumulative since the sorter was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SorterStats {
    /// Every packet pushed.
    pub packets_in: u64,
    /// Every packet delivered (equals `packets_in` after `end_batch`).
    pub packets_out: u64,
    /// Packets held in a manager.
    pub held: u64,
    /// Held packets that went to Prev or After (arrived out of sequence).
    pub out_of_sequence: u64,
    /// Unsuitable packets delivered at once.
    pub passed_unsuitable: u64,
    /// Suitable packets delivered at once because the flow table was full.
    pub passed_table_full: u64,
    /// Manager flushes because a block reached the block size.
    pub block_flushes: u64,
    /// Flush-alls because the ring size was reached.
    pub ring_flushes: u64,
    /// Batches ended (each flushes all).
    pub batches: u64,
    /// Manager flushes forced by an unsuitable packet (`FlushFlowFirst`).
    pub unsuitable_flushes: u64,
    /// Blocks delivered (non-empty manager flushes of any cause).
    pub blocks: u64,
    pub managers_created: u64,
    pub managers_reclaimed: u64,
}

impl SorterStats {
    /// Mean packets per delivered block.
    pub fn mean_block(&self) -> f64 {
        if self.blocks == 0 {
            0.0
        } else {
            self.held as f64 / self.blocks as f64
        }
    }
}

/// A copy of one manager's state, for tests and debugging.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManagerView {
    pub next_exp: u32,
    pub packet_count: u32,
    pub prev: Vec<u32>,
    pub curr: Vec<u32>,
    pub after: Vec<u32>,
}
#[derive(Debug, Clone, Copy)]
struct Held {
    id: u32,
    /// Serial distance from the block's first sequence number.
    key: i32,
}

#[derive(Debug)]
struct Manager {
    count: u32,
    next_exp: u32,
    base: u32,
    prev: Vec<Held>,
    curr: Vec<u32>,
    after: Vec<Held>,
    last_batch: u64,
    listed: bool,
}

impl Manager {
    fn new(block_size: u32) -> Self {
        // Curr holds at most a block; Prev and After are the exception.
        let block = block_size.min(64) as usize;
        Manager {
            count: 0,
            next_exp: 0,
            base: 0,
            prev: Vec::new(),
            curr: Vec::with_capacity(block),
            after: Vec::new(),
            last_batch: 0,
            listed: false,
        }
    }

    /// Add_packet_to_list_and_sort, stable. Appending is the common case
    /// (after one early packet, the rest of a block usually follows it in
    /// order into After), so only that is inlined.
    #[inline]
    fn insert_sorted(list: &mut Vec<Held>, h: Held) {
        match list.last() {
            Some(x) if x.key > h.key => Self::insert_inside(list, h),
            _ => list.push(h),
        }
    }

    /// An insertion-sort step from the end: a late packet usually belongs a
    /// few places from the end (reordering is mostly local), where moving
    /// those few entries by hand beats a binary search and a `memmove` call.
    /// Entries with an equal key stay ahead (stable).
    #[inline(never)]
    fn insert_inside(list: &mut Vec<Held>, h: Held) {
        list.push(h);
        let mut at = list.len() - 1;
        while at > 0 && list[at - 1].key > h.key {
            list[at] = list[at - 1];
            at -= 1;
        }
        list[at] = h;
    }

    /// Flush_SRPIC_manager: Prev, Curr, After, then reinitialise. `out`
    /// grows once; a block that arrived in sequence is one copy of Curr.
    #[inline]
    fn flush(&mut self, out: &mut Vec<u32>) -> u32 {
        if self.prev.is_empty() && self.after.is_empty() {
            out.extend_from_slice(&self.curr);
        } else {
            out.reserve(self.count as usize);
            out.extend(self.prev.iter().map(|h| h.id));
            out.extend_from_slice(&self.curr);
            out.extend(self.after.iter().map(|h| h.id));
            self.prev.clear();
            self.after.clear();
        }
        self.curr.clear();
        std::mem::take(&mut self.count)
    }
}

/// No slot: the one-entry flow cache is empty.
const NO_SLOT: u32 = u32::MAX;

/// The SRPIC sorter. See the module documentation. `K` is the flow key
/// ([`SortKey`]); [`Sorter::new`] makes one keyed by [`FlowKey`].
#[derive(Debug)]
pub struct Sorter<K = FlowKey> {
    cfg: SorterConfig,
    index: HashMap<K, u32, FxBuildHasher>,
    managers: Vec<Manager>,
    free: Vec<u32>,
    /// Managers that held a packet since the last flush-all, in that order.
    listed: Vec<u32>,
    /// `stats.held` at the last flush-all: Global_SRPIC_PacketCnt is
    /// `stats.held` minus this (derived, so a packet costs no extra store).
    held_at_flush_all: u64,
    batch: u64,
    last_sweep: u64,
    /// The flow of each manager slot (a freed slot keeps its last flow
    /// until reused, so `last` may name one: `keys` alone is compared).
    keys: Vec<K>,
    /// The slot of the last flow looked up: a one-entry cache, so a run of
    /// one flow's packets (most of a batch, usually) skips the table.
    /// Compared through `keys`, which is written only when a slot is
    /// (re)assigned: no store per packet for the next one to wait on.
    last: u32,
    stats: SorterStats,
}

impl Sorter<FlowKey> {
    /// A sorter keyed by [`FlowKey`] (what [`crate::wire`] parses).
    pub fn new(cfg: SorterConfig) -> Result<Self, ConfigError> {
        Sorter::new_keyed(cfg)
    }
}

impl<K: SortKey> Sorter<K> {
    /// A sorter keyed by `K` (e.g. [`crate::flow::FlowKeyV4`]).
    pub fn new_keyed(cfg: SorterConfig) -> Result<Self, ConfigError> {
        if cfg.block_size == 0 {
            return Err(ConfigError::ZeroBlockSize);
        }
        if cfg.ring_size == 0 {
            return Err(ConfigError::ZeroRingSize);
        }
        if cfg.max_flows == 0 {
            return Err(ConfigError::ZeroMaxFlows);
        }
        Ok(Sorter {
            cfg,
            index: HashMap::with_capacity_and_hasher(
                cfg.max_flows.min(1024),
                FxBuildHasher::default(),
            ),
            managers: Vec::new(),
            free: Vec::new(),
            listed: Vec::new(),
            held_at_flush_all: 0,
            batch: 0,
            last_sweep: 0,
            keys: Vec::new(),
            last: NO_SLOT,
            stats: SorterStats::default(),
        })
    }

    pub fn config(&self) -> &SorterConfig {
        &self.cfg
    }

    pub fn stats(&self) -> &SorterStats {
        &self.stats
    }

    /// Packets held right now.
    pub fn holding(&self) -> usize {
        let s = &self.stats;
        let delivered_held = s.packets_out - s.passed_unsuitable - s.passed_table_full;
        (s.held - delivered_held) as usize
    }

    /// Flows with a manager right now (at most `max_flows`).
    pub fn flows(&self) -> usize {
        self.index.len()
    }

    /// The state of `flow`'s manager, if it has one.
    pub fn manager(&self, flow: &K) -> Option<ManagerView> {
        let m = &self.managers[*self.index.get(flow)? as usize];
        Some(ManagerView {
            next_exp: m.next_exp,
            packet_count: m.count,
            prev: m.prev.iter().map(|h| h.id).collect(),
            curr: m.curr.clone(),
            after: m.after.iter().map(|h| h.id).collect(),
        })
    }

    /// Takes one packet from the ring (the body of Listing 1's loop).
    /// Appends to `out` the ids of packets this makes deliverable.
    #[inline]
    pub fn push(&mut self, id: u32, desc: &Descriptor<K>, out: &mut Vec<u32>) {
        self.stats.packets_in += 1;
        match desc {
            Descriptor::Hold(seg) => self.hold(id, seg, out),
            Descriptor::Pass { flow } => self.pass(id, flow.as_ref(), out),
        }
    }

    /// A suitable segment: into its manager's Curr, Prev or After.
    #[inline]
    fn hold(&mut self, id: u32, seg: &TcpSegment<K>, out: &mut Vec<u32>) {
        let Some(slot) = self.find_or_create(seg.flow) else {
            self.stats.passed_table_full += 1;
            self.deliver(id, out);
            return;
        };
        let m = &mut self.managers[slot as usize];
        if m.count == 0 {
            // Every batch ends with a flush-all, so the first packet of a
            // block is the one to stamp the batch on (idle reclaim).
            m.last_batch = self.batch;
            m.base = seg.seq;
            m.next_exp = seg.seq.wrapping_add(seg.len);
            m.curr.push(id);
            if !m.listed {
                m.listed = true;
                self.listed.push(slot);
            }
        } else if seq::distance(m.next_exp, seg.seq) == 0 {
            m.curr.push(id);
            m.next_exp = seg.seq.wrapping_add(seg.len);
        } else {
            let key = seg.seq.wrapping_sub(m.base) as i32;
            let prev = seq::distance(m.next_exp, seg.seq) < 0
                && (key < 0 || self.cfg.duplicates == DuplicatePolicy::Prev);
            let list = if prev { &mut m.prev } else { &mut m.after };
            Manager::insert_sorted(list, Held { id, key });
            self.stats.out_of_sequence += 1;
        }
        m.count += 1;
        self.stats.held += 1;
        if m.count >= self.cfg.block_size {
            self.stats.block_flushes += 1;
            self.flush_one(slot, out);
        }
        if self.stats.held - self.held_at_flush_all >= u64::from(self.cfg.ring_size) {
            self.stats.ring_flushes += 1;
            self.flush_all(out);
        }
    }

    /// An unsuitable packet: delivered at once (after its flow's held
    /// packets under [`UnsuitablePolicy::FlushFlowFirst`]).
    fn pass(&mut self, id: u32, flow: Option<&K>, out: &mut Vec<u32>) {
        if let (UnsuitablePolicy::FlushFlowFirst, Some(flow)) = (self.cfg.unsuitable, flow) {
            if let Some(&slot) = self.index.get(flow) {
                if self.managers[slot as usize].count > 0 {
                    self.stats.unsuitable_flushes += 1;
                    self.flush_one(slot, out);
                }
            }
        }
        self.stats.passed_unsuitable += 1;
        self.deliver(id, out);
    }

    /// The ring is empty: flush all managers (end of interrupt coalescing),
    /// and reclaim managers idle for `idle_batches` batches.
    pub fn end_batch(&mut self, out: &mut Vec<u32>) {
        self.flush_all(out);
        self.batch += 1;
        self.stats.batches += 1;
        let idle = u64::from(self.cfg.idle_batches);
        if self.batch - self.last_sweep >= idle.max(1) {
            self.last_sweep = self.batch;
            let batch = self.batch;
            let managers = &self.managers;
            let free = &mut self.free;
            let before = self.index.len();
            self.index.retain(|_, slot| {
                let keep = batch - managers[*slot as usize].last_batch <= idle;
                if !keep {
                    free.push(*slot);
                }
                keep
            });
            let reclaimed = before - self.index.len();
            if reclaimed > 0 {
                self.stats.managers_reclaimed += reclaimed as u64;
                self.last = NO_SLOT;
            }
        }
    }

    /// Sorts one batch: ids are indices into `batch`. Appends every index
    /// exactly once to `out`, in delivery order. `batch.len()` must fit a u32.
    pub fn sort_batch(&mut self, batch: &[Descriptor<K>], out: &mut Vec<u32>) {
        out.reserve(batch.len());
        for (id, desc) in (0u32..).zip(batch) {
            self.push(id, desc, out);
        }
        self.end_batch(out);
    }

    #[inline]
    fn deliver(&mut self, id: u32, out: &mut Vec<u32>) {
        out.push(id);
        self.stats.packets_out += 1;
    }

    #[inline]
    fn flush_one(&mut self, slot: u32, out: &mut Vec<u32>) {
        let n = self.managers[slot as usize].flush(out);
        if n > 0 {
            self.stats.packets_out += u64::from(n);
            self.stats.blocks += 1;
        }
    }

    /// Flush_all_SRPIC_managers, and Global_SRPIC_PacketCnt = 0.
    fn flush_all(&mut self, out: &mut Vec<u32>) {
        out.reserve(self.holding());
        for &slot in &self.listed {
            let m = &mut self.managers[slot as usize];
            m.listed = false;
            let n = m.flush(out);
            if n > 0 {
                self.stats.packets_out += u64::from(n);
                self.stats.blocks += 1;
            }
        }
        self.listed.clear();
        self.held_at_flush_all = self.stats.held;
    }

    #[inline]
    fn find_or_create(&mut self, flow: K) -> Option<u32> {
        let last = self.last as usize;
        if last < self.keys.len() && self.keys[last] == flow {
            return Some(self.last);
        }
        self.lookup_or_create(flow)
    }

    fn lookup_or_create(&mut self, flow: K) -> Option<u32> {
        let slot = match self.index.get(&flow) {
            Some(&slot) => slot,
            None => self.create(flow)?,
        };
        self.last = slot;
        Some(slot)
    }

    fn create(&mut self, flow: K) -> Option<u32> {
        if self.index.len() >= self.cfg.max_flows {
            return None;
        }
        let slot = match self.free.pop() {
            Some(slot) => {
                self.keys[slot as usize] = flow;
                slot
            }
            None => {
                self.managers.push(Manager::new(self.cfg.block_size));
                self.keys.push(flow);
                (self.managers.len() - 1) as u32
            }
        };
        self.index.insert(flow, slot);
        self.stats.managers_created += 1;
        Some(slot)
    }
}

//! The SRPIC receive path in the lab's receiver (paper section 3.3).
//!
//! The wire-facing device (`veth0`) keeps no address; a TAP device in the
//! same namespace carries the receiver's address. The driver loop is a
//! NAPI-like poll:
//!
//! 1. **Interrupt**: sleep in `ppoll` until a frame is ready on the device
//!    (or the kernel sent a frame out of the TAP).
//! 2. **Coalescing**: wait `coalesce` (like a NIC's rx-usecs) so more
//!    frames gather.
//! 3. **Poll**: take at most `budget` frames from the ring: that is the
//!    batch. With sorting, each goes through [`Sorter::push`] and the batch
//!    ends with [`Sorter::end_batch`] (the flush-all at the end of
//!    interrupt coalescing); without (`--no-sort`, the control) the batch is
//!    delivered in ring order. Same copies, same syscalls, same timing.
//! 4. **Deliver**: write each frame to the TAP, which hands it to the
//!    kernel's stack. A full batch polls again at once (NAPI's repoll).
//!
//! Two ways into the stack, both used by sorting and by the control alike:
//! - **TAP path** (`gro: false`): a plain TAP; each write enters the stack
//!   on its own, TCP included, inside the write (drivers/net/tun.c,
//!   `tun_rx_batched` → `netif_receive_skb`); GRO never sees it.
//! - **GRO path** (`gro: true`): an IFF_NAPI TAP with GRO on and threaded
//!   NAPI, its poll thread and the driver loop pinned to one CPU
//!   (napi.rs): one NAPI poll takes the whole delivered batch and
//!   GRO merges across it, as behind a NIC driver.
//!
//! Frames the kernel sends out of the TAP (ACKs, ARP) are read and sent out
//! of the device in batches.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use order::sorter::{Sorter, SorterConfig, SorterStats};
use order::wire::{parse, LinkType};
use order::{Descriptor, FlowKey};
use pktio::{Port, PortConfig};
use serde::Serialize;

use crate::runner::{prepare_thread, Runner, Snapshots, MAX_SLEEP};
use crate::stats::{FineHistogram, Histogram, LatencySummary, SignedSummary};
use crate::tap::Tap;
use crate::WireError;

/// The driver's parameters.
#[derive(Debug, Clone, Serialize)]
pub struct DriverConfig {
    /// The receiver's namespace.
    pub netns: String,
    /// The wire-facing device (its IPv4 addresses move to the TAP).
    pub dev: String,
    /// The TAP device to create.
    pub tap: String,
    /// The receiver's address and prefix length, put on the TAP.
    pub addr: Ipv4Addr,
    pub prefix: u8,
    /// Sort (SRPIC) or deliver in ring order (the control).
    pub sort: bool,
    /// Most frames per poll (NAPI weight; Linux's default is 64).
    pub budget: usize,
    /// Interrupt coalescing: wait this long after waking before polling.
    pub coalesce_us: u64,
    pub sorter: SorterConfig,
    /// The GRO path (IFF_NAPI TAP, GRO on, threaded NAPI) instead of the
    /// plain TAP path.
    pub gro: bool,
    /// GRO path: the CPU the driver loop and the TAP's NAPI thread share.
    pub gro_cpu: usize,
    /// Run the loop as SCHED_FIFO at this priority (0: normal scheduling),
    /// as the kernel's receive softirq outranks user processes.
    pub realtime_priority: i32,
}

impl DriverConfig {
    pub fn new(netns: &str, dev: &str, addr: Ipv4Addr, prefix: u8) -> Self {
        DriverConfig {
            netns: netns.to_string(),
            dev: dev.to_string(),
            tap: "srpic0".into(),
            addr,
            prefix,
            sort: true,
            budget: 64,
            coalesce_us: 50,
            sorter: SorterConfig::paper(),
            gro: false,
            // The last CPU this thread may use (0 if the mask is unreadable).
            gro_cpu: host::cpu::last_allowed_cpu().unwrap_or(0),
            realtime_priority: 5,
        }
    }
}

/// The driver's knobs as `steer wire srpic` takes them (clap::Args with
/// the `clap` feature).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DriverArgs {
    /// Deliver in ring order (the control: same path, no sorting).
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_sort: bool,
    /// Most frames per poll (NAPI weight).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 64))]
    pub budget: usize,
    /// Interrupt coalescing interval, µs.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 50))]
    pub coalesce_us: u64,
    /// SRPIC BlockSize.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 32))]
    pub block: u32,
    /// The GRO path: an IFF_NAPI TAP with GRO on and threaded NAPI, its
    /// poll thread and the driver on one CPU, so GRO merges each delivered
    /// batch (default: the plain TAP path, no GRO).
    #[cfg_attr(feature = "clap", arg(long))]
    pub gro: bool,
}

impl DriverArgs {
    /// The driver for the receiver's device `dev` in `netns`, whose address
    /// `addr`/`prefix` moves to the TAP, with these knobs.
    pub fn config(&self, netns: &str, dev: &str, addr: Ipv4Addr, prefix: u8) -> DriverConfig {
        let mut cfg = DriverConfig::new(netns, dev, addr, prefix);
        cfg.sort = !self.no_sort;
        cfg.budget = self.budget;
        cfg.coalesce_us = self.coalesce_us;
        cfg.sorter.block_size = self.block;
        cfg.gro = self.gro;
        cfg
    }
}

/// What the driver measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DriverStats {
    pub sort: bool,
    /// The GRO path's shared CPU; `None` (JSON null) on the TAP path.
    pub gro_cpu: Option<usize>,
    /// Frames read from the device.
    pub packets_in: u64,
    /// Frames written to the TAP.
    pub packets_out: u64,
    /// Frames the TAP refused.
    pub inject_errors: u64,
    /// Frames the kernel dropped before the driver read them (ring full);
    /// `None` (JSON null) when the kernel's counter could not be read.
    pub ring_drops: Option<u64>,
    /// Frames from the TAP sent out of the device (ACKs, ARP).
    pub acks_out: u64,
    pub batches: u64,
    /// Frames per batch; `None` (JSON null) when no batch was read.
    pub mean_batch: Option<f64>,
    /// `batch_sizes[n]`: batches of n frames (n = 1..=budget).
    pub batch_sizes: Vec<u64>,
    /// Per-flow blocks: packets of one TCP flow in one batch (paper section
    /// 3.1); `block_sizes[n]`: blocks of n packets.
    pub block_sizes: Vec<u64>,
    /// Packets per block; `None` when no TCP data packet was read.
    pub mean_block: Option<f64>,
    /// Device receive (kernel stamp) to TAP write, µs: the delay the driver
    /// adds. Here and below: `None` (JSON null) with no sample.
    pub added_delay: Option<LatencySummary>,
    /// One poll cycle per batch, µs: the coalescing wait actually slept
    /// (0 for a NAPI repoll after a full batch) plus the batch's processing
    /// time (first frame taken from the ring to the last TAP write done).
    pub poll_cycle: Option<LatencySummary>,
    /// The processing part of the poll cycle alone, µs.
    pub batch_time: Option<LatencySummary>,
    /// Per packet, what sorting adds relative to delivering the same batch
    /// in ring order (`--no-sort`), µs, signed: the time of the TAP write
    /// at the packet's sorted position minus the time of the write at its
    /// ring position, plus the batch's time inside the sorter (`push` and
    /// `end_batch`). Recorded with and without sorting (0 + nothing without).
    pub sort_added_delay: Option<SignedSummary>,
    /// Per packet the sorter held (not released by its own `push`): from
    /// its `push` to the `push`/`end_batch` call that released it, µs.
    pub sorter_hold: Option<SignedSummary>,
    /// The sorter's counters (held, out of sequence, flushes...).
    pub sorter: SorterStats,
}

impl DriverStats {
    /// Every frame read was written to the TAP or counted as refused.
    pub fn balanced(&self) -> bool {
        self.packets_in == self.packets_out + self.inject_errors
    }
}

/// The TAP's MAC, derived from the device's: locally administered bit
/// set, group bit cleared, last byte flipped.
fn tap_mac(dev_mac: [u8; 6]) -> [u8; 6] {
    let mut mac = dev_mac;
    mac[0] = (mac[0] | 0x02) & 0xfe;
    mac[5] ^= 0xff;
    mac
}

/// The open receive path.
pub struct Driver {
    cfg: DriverConfig,
    port: Port,
    tap: Tap,
    sorter: Sorter,
    /// IPv4 addresses (with prefix lengths) taken from `dev`, given back on
    /// drop.
    moved: Vec<(IpAddr, u8)>,
    stats: DriverStats,
    delay: Histogram,
    cycle: Histogram,
    batch_time: Histogram,
    sort_added: FineHistogram,
    hold: FineHistogram,
    /// Per batch: push time of each id (sorting only), TAP write completion
    /// time by delivery position, and the position each id was delivered at.
    pushed_at: Vec<u64>,
    written_at: Vec<u64>,
    position: Vec<u32>,
    batch: Vec<(Vec<u8>, u64)>,
    order: Vec<u32>,
    blocks: HashMap<FlowKey, u32>,
}

impl Driver {
    /// Creates the TAP with the receiver's address, takes the address off
    /// the device and opens the device's ring (root).
    pub fn open(cfg: &DriverConfig) -> Result<Driver, WireError> {
        if cfg.budget == 0 || cfg.budget > 4096 {
            return Err(WireError::Config(format!(
                "budget {} (1..=4096)",
                cfg.budget
            )));
        }
        let sorter = Sorter::new(cfg.sorter)?;
        let port = Port::open(&cfg.dev, Some(&cfg.netns), &PortConfig::default())?;
        let (name, gro) = (cfg.tap.clone(), cfg.gro);
        let tap = host::netns::run_in(Some(&cfg.netns), move || Tap::create(&name, gro))??;
        let (netns, dev) = (cfg.netns.as_str(), cfg.dev.as_str());
        let moved: Vec<(IpAddr, u8)> = host::link::addresses(Some(netns), dev)?
            .into_iter()
            .filter(|(a, _)| a.is_ipv4())
            .collect();
        for &(a, len) in &moved {
            host::link::delete_address(netns, dev, a, len)?;
        }
        // Linux answers ARP for any local address on any device: without
        // this the sender could learn the device's MAC and the kernel would
        // take the frames straight from the device, bypassing the driver.
        host::link::set_arp(netns, dev, false)?;
        let mut driver = Driver {
            cfg: cfg.clone(),
            port,
            tap,
            sorter,
            moved,
            stats: DriverStats {
                sort: cfg.sort,
                batch_sizes: vec![0; cfg.budget + 1],
                block_sizes: vec![0; cfg.budget + 1],
                ..DriverStats::default()
            },
            delay: Histogram::default(),
            cycle: Histogram::default(),
            batch_time: Histogram::default(),
            sort_added: FineHistogram::default(),
            hold: FineHistogram::default(),
            pushed_at: vec![0; cfg.budget],
            written_at: vec![0; cfg.budget],
            position: vec![0; cfg.budget],
            batch: Vec::with_capacity(cfg.budget),
            order: Vec::with_capacity(cfg.budget),
            blocks: HashMap::new(),
        };
        // A MAC derived from the device's (locally administered bit set, last
        // byte flipped): the same on every run, so the sender's ARP cache
        // stays right when the driver restarts.
        let dev_mac = host::link::link(Some(netns), dev)?
            .mac
            .ok_or_else(|| WireError::Config(format!("{dev} in {netns} has no MAC")))?;
        let tap = cfg.tap.as_str();
        host::link::set_mac(netns, tap, tap_mac(dev_mac))?;
        host::link::set_mtu(netns, tap, 1500)?;
        host::link::set_up(netns, tap)?;
        host::link::add_address(netns, tap, cfg.addr.into(), cfg.prefix)?;
        driver.set_gro(cfg.gro)?;
        if cfg.gro {
            let poller = crate::napi::enable_threaded(&cfg.netns, &cfg.tap)?;
            host::cpu::pin_thread(poller, cfg.gro_cpu)?;
            driver.stats.gro_cpu = Some(cfg.gro_cpu);
        }
        Ok(driver)
    }

    fn set_gro(&mut self, on: bool) -> Result<(), WireError> {
        match host::link::set_gro(Some(&self.cfg.netns), &self.cfg.tap, on) {
            Ok(()) => Ok(()),
            // Only on is required: failing to turn GRO off leaves the TAP as it was.
            Err(_) if !on => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    pub fn stats(&mut self) -> DriverStats {
        let mut s = self.stats.clone();
        s.ring_drops = self.port.kernel_drops().ok();
        s.mean_batch = (s.batches > 0).then(|| s.packets_in as f64 / s.batches as f64);
        let (blocks, pkts) = s
            .block_sizes
            .iter()
            .enumerate()
            .fold((0u64, 0u64), |(b, p), (n, &c)| (b + c, p + c * n as u64));
        s.mean_block = (blocks > 0).then(|| pkts as f64 / blocks as f64);
        s.added_delay = self.delay.summary();
        s.poll_cycle = self.cycle.summary();
        s.batch_time = self.batch_time.summary();
        s.sort_added_delay = self.sort_added.summary();
        s.sorter_hold = self.hold.summary();
        s.sorter = *self.sorter.stats();
        s
    }

    /// Sends what the kernel wrote to the TAP out of the device.
    fn tap_to_dev(&mut self, scratch: &mut Vec<Vec<u8>>) -> Result<(), WireError> {
        loop {
            let mut n = 0;
            while n < self.cfg.budget {
                if scratch.len() <= n {
                    scratch.push(vec![0u8; 65_536]);
                }
                let buf = &mut scratch[n];
                buf.resize(65_536, 0);
                match self.tap.read(buf) {
                    Some(len) => {
                        buf.truncate(len);
                        n += 1;
                    }
                    None => break,
                }
            }
            if n == 0 {
                return Ok(());
            }
            self.stats.acks_out += self.port.send_batch(&scratch[..n])? as u64;
            if n < self.cfg.budget {
                return Ok(());
            }
        }
    }

    /// One poll: at most `budget` frames from the ring, sorted or not, into
    /// the TAP. `waited_ns`: the coalescing wait before it (for the poll cycle).
    fn poll(&mut self, waited_ns: u64) -> usize {
        let start = pktio::now_ns();
        let mut n = 0;
        let batch = &mut self.batch;
        self.port.recv_batch(self.cfg.budget, |f| {
            if batch.len() <= n {
                batch.push((Vec::with_capacity(2048), 0));
            }
            let slot = &mut batch[n];
            slot.0.clear();
            slot.0.extend_from_slice(f.data);
            slot.1 = f.rx_ns;
            n += 1;
        });
        if n == 0 {
            return 0;
        }
        if self.pushed_at.len() < n {
            self.pushed_at.resize(n, 0);
            self.written_at.resize(n, 0);
            self.position.resize(n, 0);
        }
        self.stats.packets_in += n as u64;
        self.stats.batches += 1;
        self.stats.batch_sizes[n.min(self.cfg.budget)] += 1;
        self.order.clear();
        self.blocks.clear();
        let mut sorter_ns = 0u64;
        for (i, (frame, _)) in self.batch[..n].iter().enumerate() {
            let desc = match parse(LinkType::Ethernet, frame) {
                Ok(info) => info.descriptor(),
                Err(_) => Descriptor::Pass { flow: None },
            };
            if let Descriptor::Hold(seg) = desc {
                *self.blocks.entry(seg.flow).or_insert(0) += 1;
            }
            if self.cfg.sort {
                let before = self.order.len();
                let t0 = pktio::now_ns();
                self.pushed_at[i] = t0;
                self.sorter.push(i as u32, &desc, &mut self.order);
                let t1 = pktio::now_ns();
                sorter_ns += t1 - t0;
                for &id in &self.order[before..] {
                    if id as usize != i {
                        self.hold.record((t1 - self.pushed_at[id as usize]) as i64);
                    }
                }
            } else {
                self.order.push(i as u32);
            }
        }
        if self.cfg.sort {
            let before = self.order.len();
            let t0 = pktio::now_ns();
            self.sorter.end_batch(&mut self.order);
            let t1 = pktio::now_ns();
            sorter_ns += t1 - t0;
            for &id in &self.order[before..] {
                self.hold.record((t1 - self.pushed_at[id as usize]) as i64);
            }
        }
        for &b in self.blocks.values() {
            self.stats.block_sizes[(b as usize).min(self.cfg.budget)] += 1;
        }
        for k in 0..self.order.len() {
            let (frame, rx) = &self.batch[self.order[k] as usize];
            if self.tap.write(frame) {
                self.stats.packets_out += 1;
            } else {
                self.stats.inject_errors += 1;
            }
            let done = pktio::now_ns();
            self.delay.record(done.saturating_sub(*rx));
            self.written_at[k] = done;
            self.position[self.order[k] as usize] = k as u32;
        }
        let end = pktio::now_ns();
        for i in 0..self.order.len() {
            let at = self.written_at[self.position[i] as usize] as i64;
            let control = self.written_at[i] as i64;
            self.sort_added.record(at - control + sorter_ns as i64);
        }
        self.batch_time.record(end - start);
        self.cycle.record(end - start + waited_ns);
        n
    }

    /// Runs the receive path until `stop` is set.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        snapshot: Option<&Mutex<DriverStats>>,
    ) -> Result<DriverStats, WireError> {
        prepare_thread(self.cfg.realtime_priority)?;
        if self.cfg.gro {
            // Beside the NAPI thread, which then waits for each whole batch.
            host::cpu::pin_current_thread(self.cfg.gro_cpu)?;
        }
        let coalesce = Duration::from_micros(self.cfg.coalesce_us);
        let mut scratch = Vec::new();
        let mut snapshots = Snapshots::new(snapshot, pktio::now_ns());
        let fds = [self.port.as_raw_fd(), self.tap.as_raw_fd()];
        while !stop.load(Ordering::Relaxed) {
            let ready = pktio::wait_fds(&fds, Some(MAX_SLEEP))?;
            if ready[1] {
                self.tap_to_dev(&mut scratch)?;
            }
            if self.port.has_frames() {
                let woke = pktio::now_ns();
                if !coalesce.is_zero() {
                    pktio::wait_fds(&[], Some(coalesce))?;
                }
                let mut waited = pktio::now_ns() - woke;
                // NAPI: poll until a poll comes back short of the budget.
                while self.poll(std::mem::take(&mut waited)) == self.cfg.budget {
                    self.tap_to_dev(&mut scratch)?;
                }
                self.tap_to_dev(&mut scratch)?;
            }
            snapshots.tick(pktio::now_ns(), || self.stats());
        }
        Ok(snapshots.last(self.stats()))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The TAP goes away with its descriptor; give the device its addresses back.
        let (netns, dev) = (self.cfg.netns.as_str(), self.cfg.dev.as_str());
        let _ = host::link::set_arp(netns, dev, true);
        for &(a, len) in &self.moved {
            let _ = host::link::add_address(netns, dev, a, len);
        }
    }
}

/// A driver running on its own thread.
pub struct DriverHandle(Runner<DriverStats>);

impl DriverHandle {
    /// Opens the driver here (errors come back at once), then runs it on a thread.
    pub fn spawn(cfg: &DriverConfig) -> Result<DriverHandle, WireError> {
        let mut driver = Driver::open(cfg)?;
        let runner = Runner::spawn(
            "srpic-driver",
            "spawn the driver thread",
            move |stop, snapshot| driver.run(stop, Some(snapshot)),
        )?;
        Ok(DriverHandle(runner))
    }

    /// The latest snapshot (at most 50 ms old).
    pub fn stats(&self) -> DriverStats {
        self.0.stats()
    }

    pub fn stop(mut self) -> Result<DriverStats, WireError> {
        self.0.finish()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tap_mac_is_derived_and_local() {
        let dev = [0x0a, 0x11, 0x22, 0x33, 0x44, 0x55];
        assert_eq!(super::tap_mac(dev), [0x0a, 0x11, 0x22, 0x33, 0x44, 0xaa]);
        // A group address becomes a unicast one.
        assert_eq!(super::tap_mac([0x01, 0, 0, 0, 0, 0])[0], 0x02);
    }
}

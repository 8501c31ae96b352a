//! The Laminar engine: Laminar's TCP program (thesis chapter 5, crate
//! `rmt`) running in the match-action emulator as the receive data path of
//! an endpoint's established connections.
//!
//! The endpoint keeps what Laminar gives its control plane (§5.2, §5.4):
//! the handshake, teardown, ARP and neighbour discovery. Once a connection
//! is established the control plane installs it here
//! ([`rmt::laminar::install`]); from then on its data segments are
//! translated into the program's segment format and injected at the
//! emulated MAC port. The program's egress stages reassemble them (stages
//! 1-4, §5.3.1), its deparser writes the payload to the host by address
//! ("DMA", §5.3.3) with a notification of how far data is ready
//! (§5.3.1.6), and its mirrored pseudo segments leave as ACKs (§5.3.1.4).
//! The application's reads go back into the program as host SYNCs that
//! grow the window (§5.3.1.7), and out-of-window segments are rolled back
//! by Laminar's control plane ([`ControlPlane`], §5.3.1.2).
//!
//! Emulated time is the endpoint's clock in nanoseconds; the pipeline is
//! run until idle after every receive batch, so what a batch caused (the
//! ACKs of its pseudo segments included) leaves in the same poll.

use rmt::laminar::control::set_headers;
use std::net::IpAddr;

use rmt::laminar::program::{register, FROZEN};
use rmt::laminar::segment::{flags, HostCommand, HostEvent, TcpSegment};
use rmt::laminar::{install, program, remove, ConnectionSpec, ControlPlane, LaminarConfig};
use rmt::pipeline::{ControlError, InjectError};
use rmt::program::{ParseError, Port};
use rmt::{Pipeline, PipelineConfig, ProgramError};

/// Time a frame of `len` bytes (IPv4 on) takes on a 10 Gbit/s link, with
/// the Ethernet header, FCS, preamble and inter-frame gap: 0.8 ns a byte.
fn wire_ns(len: usize) -> u64 {
    (len as u64 + 14 + 4 + 20) * 8 / 10
}

/// The DMA channel (libTOE context) every connection of an endpoint uses:
/// the endpoint is one application thread.
const CONTEXT: u8 = 0;

/// Why the Laminar engine failed.
#[derive(Debug, thiserror::Error)]
pub enum LaminarError {
    #[error("loading Laminar's program: {0}")]
    Load(#[from] ProgramError),
    #[error("Laminar's control plane: {0}")]
    Control(#[from] ControlError),
    #[error("the pipeline refused a packet: {0}")]
    Inject(#[from] InjectError),
    #[error("the pipeline emitted bytes that do not parse: {0}")]
    Output(#[from] ParseError),
}

/// What the pipeline produced for the endpoint, after a run to idle.
#[derive(Debug, Default)]
pub struct Outputs {
    /// Payload written to a connection's receive buffer.
    pub rx_data: Vec<RxWrite>,
    /// Segments for the network: transmitted data, and the ACKs the
    /// pseudo segments became.
    pub segments: Vec<TcpSegment>,
    /// Credit grants of the generator's SYNCs (§5.3.2.1).
    pub syncs: Vec<TxSync>,
    /// Fast retransmits at the third duplicate ACK (§5.3.2.3).
    pub retransmits: Vec<TxSync>,
}

/// What a SYNC (or a fast retransmit) tells the host of a connection's
/// transmit side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxSync {
    pub conn: u16,
    /// The peer acknowledged everything before this.
    pub tx_next_ack: u32,
    /// Credits left (bytes the pipeline lets through), for a SYNC.
    pub credits: u32,
}

/// One DMA write into connection `conn`'s receive buffer.
#[derive(Debug)]
pub struct RxWrite {
    pub conn: u16,
    /// Offset in the double-mapped buffer (base address 0).
    pub addr: u64,
    /// Data is ready up to this sequence number (§5.3.1.6).
    pub notify: Option<u32>,
    pub payload: Vec<u8>,
}

/// What the engine counted, from the pipeline and its control plane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LaminarCounters {
    /// Segments from the network injected at the MAC port.
    pub segments: u64,
    /// Host SYNCs (window grants) and TX commands injected on the DMA
    /// channel, and the generator's credit SYNCs.
    pub host_syncs: u64,
    pub host_tx: u64,
    pub credit_syncs: u64,
    /// Fast retransmits the program signalled, and ACKs of data never
    /// sent that it handed to the control plane.
    pub fast_retransmits: u64,
    pub ack_out_of_window: u64,
    /// Packets that ran the egress stages (segments, SYNCs and pseudo
    /// segments).
    pub egress_passes: u64,
    /// Pseudo segments mirrored, and those that came back to egress.
    pub pseudo_mirrored: u64,
    pub pseudo_delivered: u64,
    /// Out-of-window segments rolled back by the control plane.
    pub rollbacks: u64,
    /// Packets dropped by ingress, by the traffic manager's queues, or by
    /// egress (duplicates, segments outside the interval or the window).
    pub ingress_drops: u64,
    pub tm_drops: u64,
    pub egress_drops: u64,
    /// Packets the program's parser rejected.
    pub rejected: u64,
}

/// The pipeline running Laminar's program, and its control plane.
pub struct LaminarEngine {
    pipeline: Pipeline,
    control: ControlPlane,
    /// Each installed connection as the control plane set it up (its
    /// headers entry is written again when the credit grant changes).
    specs: Vec<Option<ConnectionSpec>>,
    /// When the MAC port is free for the next frame.
    mac_free_ns: u64,
    segments: u64,
    host_syncs: u64,
    host_tx: u64,
    credit_syncs: u64,
    fast_retransmits: u64,
}

impl LaminarEngine {
    /// The program sized for `connections`, on a Tofino2-like pipeline,
    /// with its SACK option: the ACKs of a connection with an
    /// out-of-order interval carry it as one SACK block (§5.5.4.3; the
    /// endpoint passes the block on only where SACK was negotiated).
    pub fn new(connections: u32) -> Result<Self, LaminarError> {
        let config = LaminarConfig {
            connections,
            sack: true,
        };
        Ok(LaminarEngine {
            pipeline: Pipeline::load(program(config), PipelineConfig::default())?,
            control: ControlPlane::default(),
            specs: Vec::new(),
            mac_free_ns: 0,
            segments: 0,
            host_syncs: 0,
            host_tx: 0,
            credit_syncs: 0,
            fast_retransmits: 0,
        })
    }

    /// Installs an established connection (the control plane's step after
    /// the handshake).
    pub fn install(&mut self, conn: u16, spec: &ConnectionSpec) -> Result<(), LaminarError> {
        let spec = ConnectionSpec {
            ctx: CONTEXT,
            ..*spec
        };
        install(&mut self.pipeline, conn, &spec)?;
        let i = usize::from(conn);
        if self.specs.len() <= i {
            self.specs.resize(i + 1, None);
        }
        self.specs[i] = Some(spec);
        Ok(())
    }

    /// Congestion control's new rate for connection `conn`: the credits
    /// each generator SYNC grants from now on (the control plane rewrites
    /// the connection's `headers` entry, §5.3.2.1), and the most credits
    /// it may hold (`tx-credits` is cut to `max_credits` if above, so
    /// credits unspent while the host had nothing to send do not become a
    /// burst). A connection not installed is left alone.
    pub fn set_credit_grant(
        &mut self,
        conn: u16,
        grant: u32,
        max_credits: u32,
    ) -> Result<(), LaminarError> {
        let Some(spec) = self
            .specs
            .get_mut(usize::from(conn))
            .and_then(Option::as_mut)
        else {
            return Ok(());
        };
        if spec.credit_grant != grant {
            spec.credit_grant = grant;
            set_headers(&mut self.pipeline, conn, spec)?;
        }
        let i = usize::from(conn);
        let credits = self.pipeline.register_read(register::TX_CREDITS, i)?;
        if credits > u64::from(max_credits) {
            self.pipeline
                .register_write(register::TX_CREDITS, i, u64::from(max_credits))?;
        }
        Ok(())
    }

    /// The credits each generator SYNC grants connection `conn` (None:
    /// not installed).
    pub fn credit_grant(&self, conn: u16) -> Option<u32> {
        Some(self.specs.get(usize::from(conn))?.as_ref()?.credit_grant)
    }

    /// Removes a closed connection: its table entries are deleted, so its
    /// segments miss and its slot can take the next connection.
    pub fn remove(&mut self, conn: u16) -> Result<(), LaminarError> {
        if let Some(spec) = self.specs.get_mut(usize::from(conn)) {
            *spec = None;
        }
        Ok(remove(&mut self.pipeline, conn)?)
    }

    /// A segment from the network arrives at `at_ns`, or later: at the
    /// pipeline's current time if a run to idle took emulated time past
    /// the clock, and after the previous frame has crossed a 10 Gbit/s
    /// link. A receive batch reaches the endpoint at one instant; entering
    /// the MAC port spaced as on the wire, each segment's pseudo segment
    /// (mirrored within a few hundred ns) leaves as its ACK before the next
    /// segment, as on the hardware. Injected at one instant, every ACK of a
    /// batch would carry the batch's final state, and the peer would count
    /// all but the first as duplicate ACKs.
    pub fn receive(&mut self, at_ns: u64, segment: &TcpSegment) -> Result<(), LaminarError> {
        let bytes = segment.emit();
        let at = at_ns.max(self.pipeline.now()).max(self.mac_free_ns);
        self.mac_free_ns = at + wire_ns(bytes.len());
        self.segments += 1;
        self.pipeline.inject(at, Port::Mac(0), &bytes)?;
        Ok(())
    }

    /// The application consumed `grant` bytes of `conn`'s receive buffer:
    /// a host SYNC hands the space back to the window (§5.3.1.7).
    pub fn sync(&mut self, at_ns: u64, conn: u16, grant: u32) -> Result<(), LaminarError> {
        let at = at_ns.max(self.pipeline.now());
        let cmd = HostCommand::Sync {
            conn,
            rx_grant: grant,
        };
        self.host_syncs += 1;
        self.pipeline.inject(at, Port::Dma(CONTEXT), &cmd.emit())?;
        Ok(())
    }

    /// The packet generator's SYNC for connection `conn` (batch `batch`):
    /// it grants the connection's credits and reports them with
    /// `tx-next-ack` to the host (§5.3.2.1). The generator's batch covers
    /// the installed connections only (see [`crate::laminar`]).
    pub fn credit_sync(&mut self, at_ns: u64, conn: u16, batch: u16) -> Result<(), LaminarError> {
        let at = at_ns.max(self.pipeline.now());
        let [b0, b1] = batch.to_be_bytes();
        let [c0, c1] = conn.to_be_bytes();
        self.credit_syncs += 1;
        self.pipeline
            .inject(at, Port::Generator(0), &[0, 0, b0, b1, c0, c1])?;
        Ok(())
    }

    /// The host pushes `payload`, at `offset` of `conn`'s transmit buffer
    /// (a TX command, §5.3.2.2).
    pub fn transmit(
        &mut self,
        at_ns: u64,
        conn: u16,
        offset: u32,
        payload: &[u8],
    ) -> Result<(), LaminarError> {
        let at = at_ns.max(self.pipeline.now());
        let cmd = HostCommand::Tx {
            conn,
            offset,
            payload: payload.to_vec(),
        };
        self.host_tx += 1;
        self.pipeline.inject(at, Port::Dma(CONTEXT), &cmd.emit())?;
        Ok(())
    }

    /// The peer's window as the program last took it (`tx-remote-avail`,
    /// bytes).
    pub fn tx_remote_avail(&self, conn: u16) -> Result<u32, LaminarError> {
        Ok(self
            .pipeline
            .register_read(register::TX_REMOTE_AVAIL, usize::from(conn))? as u32)
    }

    /// Runs the pipeline until nothing is queued or on the mirror path,
    /// lets the control plane handle its digests (rollbacks), and returns
    /// what left the pipeline.
    pub fn run_to_idle(&mut self) -> Result<Outputs, LaminarError> {
        let mut outputs = Outputs::default();
        loop {
            self.pipeline.run_until_idle(u64::MAX);
            self.control.handle(&mut self.pipeline)?;
            let emitted = self.pipeline.take_emitted();
            if emitted.is_empty() && self.pipeline.busy_until().is_none() {
                return Ok(outputs);
            }
            for e in emitted {
                match e.port {
                    Port::Dma(_) => match HostEvent::parse(&e.bytes)? {
                        HostEvent::RxData {
                            conn,
                            addr,
                            notify,
                            payload,
                        } => outputs.rx_data.push(RxWrite {
                            conn,
                            addr,
                            notify,
                            payload,
                        }),
                        HostEvent::Sync {
                            conn,
                            tx_next_ack,
                            credits,
                        } => outputs.syncs.push(TxSync {
                            conn,
                            tx_next_ack,
                            credits,
                        }),
                        HostEvent::Retransmit { conn, tx_next_ack } => {
                            self.fast_retransmits += 1;
                            outputs.retransmits.push(TxSync {
                                conn,
                                tx_next_ack,
                                credits: 0,
                            })
                        }
                    },
                    _ => outputs.segments.push(TcpSegment::parse(&e.bytes)?),
                }
            }
        }
    }

    /// The next sequence number connection `conn` expects (its
    /// `rx-next-seq` register, read by the control plane).
    pub fn rx_next_seq(&self, conn: u16) -> Result<u32, LaminarError> {
        Ok(self
            .pipeline
            .register_read(register::RX_NEXT_SEQ, usize::from(conn))? as u32)
    }

    /// The peer's FIN took sequence number `fin_seq`: the control plane
    /// moves `rx-next-seq` past it, so the program's ACKs acknowledge it
    /// and the peer's later ACKs are in order.
    pub fn fin_received(&mut self, conn: u16, fin_seq: u32) -> Result<(), LaminarError> {
        self.pipeline.register_write(
            register::RX_NEXT_SEQ,
            usize::from(conn),
            u64::from(fin_seq.wrapping_add(1)),
        )?;
        Ok(())
    }

    /// Connection `conn`'s out-of-order interval (its `rx-ooo-head` and
    /// `rx-ooo-tail` registers, offsets from `rx-next-seq`), as sequence
    /// numbers; None when it holds none.
    pub fn rx_ooo_interval(&self, conn: u16) -> Result<Option<(u32, u32)>, LaminarError> {
        let i = usize::from(conn);
        let tail = self.pipeline.register_read(register::RX_OOO_TAIL, i)? as u32;
        if tail == 0 {
            return Ok(None);
        }
        let head = self.pipeline.register_read(register::RX_OOO_HEAD, i)? as u32;
        let next = self.rx_next_seq(conn)?;
        Ok(Some((next.wrapping_add(head), next.wrapping_add(tail))))
    }

    /// The receive window connection `conn` has left (its `rx-avail`
    /// register; 0 while a rollback is pending).
    pub fn rx_window(&self, conn: u16) -> Result<u32, LaminarError> {
        let avail = self
            .pipeline
            .register_read(register::RX_AVAIL, usize::from(conn))?;
        Ok(if avail & FROZEN != 0 { 0 } else { avail as u32 })
    }

    pub fn counters(&self) -> LaminarCounters {
        let c = self.pipeline.counters();
        LaminarCounters {
            segments: self.segments,
            host_syncs: self.host_syncs,
            host_tx: self.host_tx,
            credit_syncs: self.credit_syncs,
            fast_retransmits: self.fast_retransmits,
            ack_out_of_window: self.control.ack_resets,
            egress_passes: c.egress_processed,
            pseudo_mirrored: c.mirror.offered,
            pseudo_delivered: c.mirror.delivered,
            rollbacks: self.control.rollbacks,
            ingress_drops: c.ingress_dropped,
            tm_drops: c.tm.dropped,
            egress_drops: c.egress_dropped,
            rejected: c.rejected,
        }
    }
}

/// The program's 32-bit address fields for the endpoint's addresses.
///
/// The program parses IPv4 (its parser, connection table and prebuilt
/// headers hold 32-bit addresses). An IPv4 address is its own handle. An
/// IPv6 connection is carried with handles in place of its 128-bit
/// addresses: the control plane gives each address it installs a 32-bit
/// handle, the translation into the program's format writes handles, and
/// the frames the program's segments become carry the addresses again.
/// This is the address compression P4 programs use for 128-bit keys: a
/// table from the address to a short index in front of the pipeline's
/// exact-match tables; the TCP state the program keeps does not depend
/// on the address family.
#[derive(Debug, Clone, Default)]
pub struct AddressHandles {
    /// IPv6 addresses by handle - 1.
    v6: Vec<std::net::Ipv6Addr>,
    by_v6: std::collections::HashMap<std::net::Ipv6Addr, u32>,
}

impl AddressHandles {
    /// The handle of `addr`, given one if it has none (the control
    /// plane's step when it installs a connection).
    pub fn assign(&mut self, addr: IpAddr) -> u32 {
        match addr {
            IpAddr::V4(a) => u32::from(a),
            IpAddr::V6(a) => *self.by_v6.entry(a).or_insert_with(|| {
                self.v6.push(a);
                self.v6.len() as u32
            }),
        }
    }

    /// The handle of `addr`, if it has one (the translation of a segment).
    pub fn get(&self, addr: IpAddr) -> Option<u32> {
        match addr {
            IpAddr::V4(a) => Some(u32::from(a)),
            IpAddr::V6(a) => self.by_v6.get(&a).copied(),
        }
    }

    /// The address behind `handle` for an endpoint of `family`'s address
    /// family (`family` is any address of it).
    pub fn address(&self, family: IpAddr, handle: u32) -> Option<IpAddr> {
        match family {
            IpAddr::V4(_) => Some(IpAddr::V4(handle.into())),
            IpAddr::V6(_) => {
                let i = usize::try_from(handle).ok()?.checked_sub(1)?;
                self.v6.get(i).copied().map(IpAddr::V6)
            }
        }
    }
}

/// A segment from the network in the program's format: the IPv4 and TCP
/// header fields it reads, and the payload. `ack: None` hands the program
/// the data only (the ACK bit cleared), for a connection whose
/// acknowledgements go to another transmit path. FIN is never given: the
/// program would drop the whole segment as an exception, and teardown is
/// the control plane's.
pub fn network_segment(
    (src_ip, dst_ip): (u32, u32),
    (src_port, dst_port): (u16, u16),
    seq: u32,
    ack: Option<(u32, u16)>,
    payload: &[u8],
) -> TcpSegment {
    let (ack_flag, ack, window) = match ack {
        Some((ack, window)) => (flags::ACK, ack, window),
        None => (0, 0, 0),
    };
    TcpSegment {
        src_ip,
        dst_ip,
        src_port,
        dst_port,
        seq,
        ack,
        flags: flags::PSH | ack_flag,
        window,
        sack: None,
        payload: payload.to_vec(),
    }
}

/// A connection for tests: it expects sequence number 1000 at the start
/// of a 4 KiB receive buffer and has nothing to send.
#[cfg(test)]
pub(crate) fn test_spec() -> ConnectionSpec {
    ConnectionSpec {
        local_ip: 0x0a00_0002,
        local_port: 5555,
        remote_ip: 0x0a00_0001,
        remote_port: 40000,
        ctx: CONTEXT,
        rx_next_seq: 1000,
        rx_buffer_addr: 0,
        rx_buffer_size: 4096,
        rx_avail: 4096,
        tx_base_seq: 77,
        tx_next_ack: 77,
        tx_credits: 0,
        credit_grant: 0,
        tx_remote_avail: 0,
        wscale: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ConnectionSpec {
        test_spec()
    }

    fn seg(seq: u32, len: usize) -> TcpSegment {
        let s = spec();
        network_segment(
            (s.remote_ip, s.local_ip),
            (s.remote_port, s.local_port),
            seq,
            None,
            &vec![7; len],
        )
    }

    #[test]
    fn in_order_data_is_written_notified_and_acknowledged() {
        let mut e = LaminarEngine::new(4).unwrap();
        e.install(1, &spec()).unwrap();
        e.receive(0, &seg(1000, 100)).unwrap();
        let out = e.run_to_idle().unwrap();
        assert_eq!(out.rx_data.len(), 1);
        assert_eq!(out.rx_data[0].addr, 0);
        assert_eq!(out.rx_data[0].notify, Some(1100));
        assert_eq!(out.segments.len(), 1);
        assert_eq!(out.segments[0].ack, 1100);
        assert_eq!(out.segments[0].window, 4096 - 100);
        assert_eq!(e.rx_next_seq(1).unwrap(), 1100);
        let c = e.counters();
        assert_eq!((c.segments, c.pseudo_delivered), (1, 1));
    }

    #[test]
    fn a_segment_without_its_ack_carries_no_ack_bit() {
        let s = spec();
        let ends = ((s.remote_ip, s.local_ip), (s.remote_port, s.local_port));
        let data_only = network_segment(ends.0, ends.1, 5, None, b"x");
        assert_eq!(data_only.flags & flags::ACK, 0);
        let with_ack = network_segment(ends.0, ends.1, 5, Some((9, 3)), b"");
        assert_eq!(
            (with_ack.flags & flags::ACK, with_ack.ack, with_ack.window),
            (flags::ACK, 9, 3)
        );
        assert_eq!(with_ack.flags & flags::FIN, 0);
    }

    /// Full-sized segments take longer on the link than a mirror takes:
    /// each is acknowledged before the next arrives.
    #[test]
    fn each_segment_of_a_batch_is_acknowledged_with_its_own_state() {
        let mut e = LaminarEngine::new(4).unwrap();
        e.install(0, &spec()).unwrap();
        for i in 0..2 {
            e.receive(0, &seg(1000 + i * 1400, 1400)).unwrap();
        }
        let out = e.run_to_idle().unwrap();
        let acks: Vec<u32> = out.segments.iter().map(|s| s.ack).collect();
        assert_eq!(acks, [2400, 3800]);
    }

    #[test]
    fn a_gap_closed_merges_the_interval_and_a_sync_reopens_the_window() {
        let mut e = LaminarEngine::new(4).unwrap();
        e.install(0, &spec()).unwrap();
        e.receive(0, &seg(1100, 100)).unwrap();
        e.receive(0, &seg(1000, 100)).unwrap();
        let out = e.run_to_idle().unwrap();
        let ready = out.rx_data.iter().filter_map(|w| w.notify).max();
        assert_eq!(ready, Some(1200));
        assert_eq!(e.rx_next_seq(0).unwrap(), 1200);
        e.sync(0, 0, 200).unwrap();
        e.receive(0, &seg(1200, 10)).unwrap();
        let out = e.run_to_idle().unwrap();
        assert_eq!(out.segments.last().map(|s| s.window), Some(4096 - 10));
    }

    #[test]
    fn ipv6_addresses_get_handles_and_ipv4_ones_are_their_own() {
        let mut h = AddressHandles::default();
        let (a, b): (IpAddr, IpAddr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let v4: IpAddr = "10.0.0.7".parse().unwrap();
        assert_eq!(h.get(a), None);
        let (ha, hb) = (h.assign(a), h.assign(b));
        assert_ne!(ha, hb);
        assert_eq!((h.assign(a), h.get(b)), (ha, Some(hb)));
        assert_eq!(h.address(a, hb), Some(b));
        assert_eq!(h.address(a, 0), None);
        assert_eq!(h.address(a, 99), None);
        assert_eq!(h.assign(v4), 0x0a00_0007);
        assert_eq!(h.address(v4, 0x0a00_0007), Some(v4));
    }

    /// The grant is what the generator's SYNCs add from now on, and
    /// credits above the cap are cut at once.
    #[test]
    fn a_new_credit_grant_is_what_the_next_syncs_add() {
        let mut e = LaminarEngine::new(4).unwrap();
        e.install(
            2,
            &ConnectionSpec {
                tx_credits: 50_000,
                credit_grant: 100,
                ..spec()
            },
        )
        .unwrap();
        e.set_credit_grant(2, 3000, 20_000).unwrap();
        assert_eq!(e.credit_grant(2), Some(3000));
        e.credit_sync(0, 2, 1).unwrap();
        e.credit_sync(0, 2, 2).unwrap();
        let credits: Vec<u32> = e
            .run_to_idle()
            .unwrap()
            .syncs
            .iter()
            .map(|s| s.credits)
            .collect();
        assert_eq!(credits, [23_000, 26_000]);
        // A connection never installed has no grant to set.
        e.set_credit_grant(3, 10, 10).unwrap();
        assert_eq!(e.credit_grant(3), None);
    }

    #[test]
    fn a_segment_beyond_the_window_is_rolled_back() {
        let mut e = LaminarEngine::new(4).unwrap();
        e.install(
            0,
            &ConnectionSpec {
                rx_avail: 100,
                ..spec()
            },
        )
        .unwrap();
        e.receive(0, &seg(1000, 200)).unwrap();
        e.run_to_idle().unwrap();
        assert_eq!(e.counters().rollbacks, 1);
        assert_eq!(e.rx_next_seq(0).unwrap(), 1000);
    }
}

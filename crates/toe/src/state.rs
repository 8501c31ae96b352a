//! Connection state, partitioned as in thesis Table 4.1: each stage owns
//! one partition and no other stage can reach it. The partitions are
//! separate types held in separate tables (one per stage, indexed by the
//! same connection index), so the compiler, not a convention, keeps the
//! protocol stage the only writer of sequence state (section 4.3.1).

use std::net::IpAddr;

use crate::ooo::OooIntervals;
use crate::recovery::{LossState, Sent};
use crate::sack::ReportedBlocks;
use crate::segment::Route;

/// Pre-processor partition: connection identification (Table 4.1, 15 B).
/// Written by the control plane at setup, read by pre-processing to find a
/// segment's connection and to build the headers of what it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnId {
    pub peer_mac: [u8; 6],
    pub local_mac: [u8; 6],
    pub peer_ip: IpAddr,
    pub local_ip: IpAddr,
    pub local_port: u16,
    pub remote_port: u16,
    /// hash(4-tuple) % groups: which pipeline replica serves it.
    pub flow_group: u8,
}

impl ConnId {
    /// *Head*: the addresses of what this connection sends.
    pub fn route(&self) -> Route {
        Route {
            src_mac: self.local_mac,
            dst_mac: self.peer_mac,
            src: self.local_ip,
            dst: self.peer_ip,
            src_port: self.local_port,
            dst_port: self.remote_port,
        }
    }
}

/// Protocol partition: the TCP state machine of an established connection
/// (Table 4.1, 43 B). Only the protocol stage changes it; the control
/// plane writes it at setup and through the stage's own methods.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProtoState {
    /// Receive buffer position of the next in-order byte (free-running;
    /// the buffer index is modulo its size).
    pub rx_pos: u32,
    /// Transmit buffer position of the next byte to send.
    pub tx_pos: u32,
    /// Bytes the application queued that were not yet sent.
    pub tx_avail: u32,
    /// Free receive buffer space from `ack` on: the receive window.
    pub rx_avail: u32,
    /// The peer's receive window, bytes (scaled).
    pub remote_win: u32,
    /// Bytes sent and not yet acknowledged.
    pub tx_sent: u32,
    /// Sequence number of the next new byte to send (SND.NXT; with
    /// selective retransmission it is always SND.MAX).
    pub seq: u32,
    /// One past the highest sequence number ever sent (SND.MAX; not in
    /// Table 4.1: FlexTOE keeps it in the control plane's retransmission
    /// state).
    pub tx_high: u32,
    /// Next sequence number expected from the peer (RCV.NXT).
    pub ack: u32,
    /// The out-of-order intervals, their bytes already placed in the
    /// receive buffer (Table 4.1 has one: the default bound).
    pub ooo: OooIntervals,
    /// The intervals as SACK blocks, newest first (RFC 2018 section 4).
    pub sack_reported: ReportedBlocks,
    /// The sender's loss recovery ([`crate::recovery`]).
    pub loss: LossState,
    /// The peer's timestamp to echo (TS.Recent, RFC 7323 section 4.3).
    pub next_ts: u32,
    /// The peer's FIN was received in order.
    pub fin_received: bool,
    /// The application closed: send a FIN after the last queued byte.
    pub fin_queued: bool,
    /// Our FIN was sent (it takes the sequence number after the data).
    pub fin_sent: bool,
}

impl ProtoState {
    /// SND.UNA and SND.MAX.
    pub fn sent(&self) -> Sent {
        Sent {
            una: self.seq.wrapping_sub(self.tx_sent),
            max: self.tx_high,
        }
    }
}

/// Post-processor partition: application interface and congestion
/// statistics (Table 4.1, 51 B). Read-only after setup except for the
/// statistics, whose updates commute (section 4.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PostState {
    /// The application's id for the connection.
    pub opaque: u64,
    /// The context (queue) that is told about it.
    pub context: u16,
    pub rx_size: u32,
    pub tx_size: u32,
    /// Our window scale (the shift of the window we advertise).
    pub rx_wscale: u8,
    /// Timestamps were negotiated (RFC 7323): every segment carries one.
    pub timestamps: bool,
    /// SACK was negotiated (RFC 2018): ACKs carry the receiver's blocks.
    pub sack: bool,
    /// Bytes acknowledged and bytes acknowledged with ECN-Echo.
    pub cnt_ackb: u64,
    pub cnt_ecnb: u64,
    /// Fast retransmits.
    pub cnt_fretx: u32,
    /// Data segments sent again (not new data), over the connection's
    /// life: TCP_INFO's tcpi_total_retrans.
    pub cnt_retx: u32,
    /// Smoothed RTT estimate, microseconds (from timestamps).
    pub rtt_est: u32,
    /// Transmit rate the control plane set, bytes per second (0: no limit).
    pub rate: u32,
    /// Echo ECN-Echo on the next ACK: a CE mark arrived (RFC 3168).
    pub ece: bool,
}

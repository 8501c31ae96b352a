//! `order`: reorder repair and reorder measurement for the receive side.
//!
//! - [`sorter`]: SRPIC (Wu et al., "Sorting Reordered Packets with Interrupt
//!   Coalescing", section 3.3, Listing 1) over packet descriptors, for a
//!   receive loop to call per packet and per batch.
//! - [`wire`]: checked header views and a parser that turns a frame into the
//!   sorter's descriptor (flow key, sequence number, payload length, flags,
//!   suitability).
//! - [`metrics`]: RFC 4737 and RFC 5236 reordering metrics per flow.
//! - [`capture`]: pcap / pcapng in and out; [`replay`]: a capture through
//!   the sorter, as a SRPIC receiver would deliver it; [`report`]: a whole
//!   capture's metrics and replay.
//!
//! See docs/srpic.md for the algorithm as implemented and every decision.

#![deny(unsafe_code)]

pub mod capture;
pub mod flow;
pub mod metrics;
pub mod replay;
pub mod report;
pub mod seq;
pub mod sorter;
pub mod wire;

pub use capture::{Capture, CaptureError};
pub use flow::{FlowKey, FlowKeyV4};
pub use metrics::{
    flow_reports, reorder_metrics, Arrival, FlowReport, MetricsConfig, ReorderMetrics,
};
pub use replay::{replay, ReplayConfig};
pub use report::{capture_reports, replay_capture, Totals};
pub use sorter::{
    Descriptor, DuplicatePolicy, SortKey, Sorter, SorterConfig, SorterStats, TcpSegment,
    UnsuitablePolicy, Variant,
};

//! Capture files (pcap, pcapng): reading never panics, and the whole path
//! behind it (parse, metrics, SRPIC replay, write back) does not either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use order::capture::Capture;
use order::metrics::{flow_reports, MetricsConfig};
use order::replay::{descriptors, parse_capture, replay, ReplayConfig};
use order::sorter::SorterConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(cap) = Capture::read_lenient(data) else { return };
    let infos = parse_capture(&cap);
    let _ = flow_reports(
        cap.packets.iter().zip(&infos).filter_map(|(p, i)| Some((p.time_ns, i.as_ref()?))),
        &MetricsConfig::default(),
    );
    let cfg = ReplayConfig { sorter: SorterConfig { block_size: 4, ring_size: 16, max_flows: 8, ..SorterConfig::default() }, batch: 8, gap_ns: None };
    if let Ok(r) = replay(&descriptors(&cap, &infos), &cfg) {
        assert_eq!(r.order.len(), cap.packets.len(), "the sorter lost or duplicated a packet");
        let mut out = Vec::new();
        let _ = cap.write(&mut out, &r.order, Some(&r.released_by));
    }
});

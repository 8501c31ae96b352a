//! `steer exp xdp-overhead` as root, shortened: every mode is measured in
//! every repetition, and each mode's drop counters come from its own path
//! (the cpumap's only with the program attached, the sender's qdisc in
//! every mode); RFS, asked for, is a fourth mode and leaves the machine's
//! RFS table as it found it.

use exp::xdp_overhead::{self, Mode, XdpOverheadParams};

testkit::strict_mode_guard!();

#[test]
#[ignore = "needs root (namespaces, veth, XDP, tracepoints): `make test` runs it as root"]
fn three_modes_with_their_drop_counters() {
    testkit::require_root("network namespaces, veths, XDP");
    testkit::require_program("iperf3", "make deps installs it");
    let params = XdpOverheadParams {
        repetitions: 2,
        seconds: 1,
        streams: 2,
        queues: 2,
        rfs: true,
        ..XdpOverheadParams::default()
    };
    let flow_entries = "/proc/sys/net/core/rps_sock_flow_entries";
    let before = std::fs::read_to_string(flow_entries).unwrap();
    let r = exp::experiment::run::<xdp_overhead::XdpOverheadExperiment>(params, false, &mut |_| {})
        .unwrap();
    // The machine-wide RFS table is back to what it was.
    assert_eq!(std::fs::read_to_string(flow_entries).unwrap(), before);
    assert_eq!(r.samples.len(), 8);
    for mode in [Mode::SoftwareRss, Mode::NoProgram, Mode::Rps, Mode::Rfs] {
        let of: Vec<_> = r.samples.iter().filter(|s| s.mode == mode).collect();
        assert_eq!(of.len(), 2, "{mode:?}");
        for s in of {
            assert!(s.gbit_per_s > 0.0, "{s:?}");
            // A pfifo is on the sender in every mode.
            assert!(s.drops.sender_qdisc_requeues.is_some(), "{s:?}");
            match mode {
                // The cpumap's tracepoints saw this attachment's frames.
                Mode::SoftwareRss => {
                    assert!(s.drops.cpumap_enqueued.is_some_and(|n| n > 0), "{s:?}")
                }
                Mode::NoProgram | Mode::Rps | Mode::Rfs => {
                    assert_eq!(s.drops.cpumap_enqueued, None, "{s:?}")
                }
            }
        }
    }
    assert_eq!(r.with_rps.n, 2);
    assert_eq!(r.with_rfs.as_ref().map(|s| s.n), Some(2));
    assert!(r.ratio_to_rps.is_some());
    assert_eq!(r.cpus.len(), 2.min(r.meta.cores));
}

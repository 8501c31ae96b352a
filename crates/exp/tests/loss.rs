//! `steer exp loss` as root, one small cell: 1% uniform loss, 2 ms, 1
//! Gbit/s, both directions, the default engine and a reno sender, one
//! second per transfer. Every transfer arrives exact, the wire dropped
//! frames of each, and each sender's retransmissions and timeouts were
//! read (a Linux sender's from its namespace, the data path's from the
//! endpoint), so every cell has a ratio.

use exp::loss::{self, Direction, LossModel, LossParams, Percent, Stack};

testkit::strict_mode_guard!();

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn one_cell_each_way_is_exact_and_counts_its_retransmissions() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP");
    let params = LossParams {
        loss: vec![Percent(1.0)],
        model: vec![LossModel::Uniform],
        seconds: 1.0,
        repetitions: 1,
        ..LossParams::default().quick()
    };
    let allowed = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
    let before = std::fs::read_to_string(allowed).unwrap();
    let r = exp::experiment::run::<loss::LossExperiment>(params, false, &mut |_| {}).unwrap();
    // The machine-wide list is back to what it was.
    assert_eq!(std::fs::read_to_string(allowed).unwrap(), before);
    assert!(r.byte_exact, "{:#?}", r.samples);
    assert_eq!(r.samples.len(), 4);
    for s in &r.samples {
        assert!(s.wire_drops > 0, "{s:?}");
        assert!(s.retransmissions.is_some_and(|n| n > 0), "{s:?}");
        assert!(s.rtos.is_some(), "{s:?}");
        assert!(s.goodput_mbit.is_some_and(|g| g > 0.0), "{s:?}");
        // D-SACKs are counted on both ends with the default engine.
        assert!(s.spurious_retransmissions.is_some(), "{s:?}");
        assert_eq!(s.endpoint.is_some(), s.stack != Stack::Linux, "{s:?}");
    }
    assert_eq!(r.cells.len(), 2);
    for c in &r.cells {
        assert!(c.ratio.is_some_and(|x| x > 0.0), "{c:?}");
    }
    let send = r
        .cells
        .iter()
        .find(|c| c.direction == Direction::Send)
        .unwrap();
    assert_eq!(send.id, "send,reno,1%,2ms,1gbit,toe");
    assert_eq!(
        r.samples
            .iter()
            .find(|s| s.direction == Direction::Send && s.stack == Stack::Toe)
            .and_then(|s| s.sender_cc.as_deref()),
        // toe's NewReno says so with TCP_CONGESTION's spelling.
        Some("reno")
    );
}

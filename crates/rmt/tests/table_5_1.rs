//! Table 5.1 of the thesis, reproduced by running Laminar's program on the
//! emulator: every row, in order, against the values the thesis prints.

use rmt::laminar::example::{table_5_1, Row};

/// (seq, plen) of a segment.
type Segment = Option<(u32, u32)>;
/// (rx-next-seq, rx-avail, rx-ooo-tail, rx-ooo-head) after it.
type State = Option<(u32, u32, u32, u32)>;

/// The rows as printed in Table 5.1; `None` state for the lost P#3.
const THESIS: [(&str, Segment, State); 13] = [
    ("initial", None, Some((1000, 10000, 0, 0))),
    ("#1", Some((1500, 500)), Some((1000, 10000, 1000, 500))),
    ("#2", Some((1000, 500)), Some((1500, 9500, 500, 0))),
    ("#3", Some((2000, 500)), Some((1500, 9500, 1000, 0))),
    ("#4", Some((1500, 100)), Some((1600, 9400, 900, 0))),
    ("P#2", Some((1500, 500)), Some((2000, 9000, 500, 0))),
    ("P#3", Some((1500, 1000)), None),
    ("#5", Some((2500, 100)), Some((2000, 9000, 600, 0))),
    ("#6", Some((2000, 100)), Some((2100, 8900, 500, 0))),
    ("#7", Some((3000, 100)), Some((2100, 8900, 500, 0))),
    ("P#4", Some((1600, 900)), Some((2500, 8500, 100, 0))),
    ("P#5", Some((2000, 600)), Some((2600, 8400, 0, 0))),
    ("P#6", Some((2100, 500)), Some((2600, 8400, 0, 0))),
];

fn expected(row: &(&str, Segment, State)) -> Row {
    let (segment, seg, state) = *row;
    Row {
        segment: segment.into(),
        seq: seg.map(|s| s.0),
        plen: seg.map(|s| s.1),
        rx_next_seq: state.map(|s| s.0),
        rx_avail: state.map(|s| s.1),
        rx_ooo_tail: state.map(|s| s.2),
        rx_ooo_head: state.map(|s| s.3),
    }
}

#[test]
fn the_emulator_reproduces_table_5_1_row_by_row() {
    let rows = table_5_1().unwrap();
    for (i, want) in THESIS.iter().map(expected).enumerate() {
        assert_eq!(rows.get(i), Some(&want), "row {i} of Table 5.1");
    }
    assert_eq!(
        rows.len(),
        THESIS.len(),
        "extra rows: {:?}",
        &rows[THESIS.len().min(rows.len())..]
    );
}

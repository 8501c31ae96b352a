//! The packet generator (thesis §5.1.1): applications that emit a batch of
//! packets every period, the way Laminar raises its periodic SYNCs inside
//! the pipeline (§5.3.2.1).
//!
//! A generated packet is 6 bytes, as in the generator header of switch
//! ASICs: application id, a reserved byte, the batch number and the packet
//! number within the batch (both big-endian).

use serde::Serialize;

/// One generator application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GeneratorApp {
    pub app: u8,
    /// Time of the first batch.
    pub start_ns: u64,
    pub period_ns: u64,
    /// Packets per batch (one per connection, say).
    pub packets: u16,
}

/// Length of a generated packet.
pub const HEADER_LEN: usize = 6;

/// A running application: when its next batch is due.
#[derive(Debug, Clone)]
pub(crate) struct Generator {
    pub app: GeneratorApp,
    pub next_ns: u64,
    pub batch: u16,
}

impl Generator {
    pub fn new(app: GeneratorApp) -> Self {
        Generator {
            next_ns: app.start_ns,
            batch: 0,
            app,
        }
    }

    /// The packets of the batch due now; schedules the next one.
    pub fn fire(&mut self) -> impl Iterator<Item = [u8; HEADER_LEN]> + '_ {
        let batch = self.batch;
        self.batch = self.batch.wrapping_add(1);
        self.next_ns += self.app.period_ns.max(1);
        let app = self.app.app;
        (0..self.app.packets).map(move |p| {
            let [b0, b1] = batch.to_be_bytes();
            let [p0, p1] = p.to_be_bytes();
            [app, 0, b0, b1, p0, p1]
        })
    }
}

/// A generated packet's header fields: (app, batch, packet).
pub fn parse_header(bytes: &[u8]) -> Option<(u8, u16, u16)> {
    match *bytes {
        [app, _, b0, b1, p0, p1, ..] => Some((
            app,
            u16::from_be_bytes([b0, b1]),
            u16::from_be_bytes([p0, p1]),
        )),
        _ => None,
    }
}

//! The host side of one connection's receive path, as libTOE sees it: a
//! payload buffer the pipeline writes by address through a double mapping
//! (§5.3.3, Figure 5.7), the notifications saying how far data is ready
//! (§5.3.1.6), and the SYNCs that hand consumed space back (§5.3.1.7).

use super::segment::{HostCommand, HostEvent};

/// Why a DMA write did not fit the buffer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("a write of {len} bytes at {addr:#x} falls outside the double-mapped buffer at {base:#x} of {size} bytes")]
    OutOfBuffer {
        addr: u64,
        len: usize,
        base: u64,
        size: u32,
    },
}

/// One connection's receive buffer in host memory.
#[derive(Debug, Clone)]
pub struct HostReceiver {
    conn: u16,
    base_addr: u64,
    first_seq: u32,
    buffer: Vec<u8>,
    /// Sequence number up to which the pipeline said data is ready.
    ready: u32,
    /// Sequence number up to which the application has read.
    consumed: u32,
    /// Sequence number up to which consumed space was granted back.
    granted: u32,
}

impl HostReceiver {
    /// A buffer of `size` bytes at `base_addr`, whose first byte holds
    /// sequence number `first_seq`.
    pub fn new(conn: u16, base_addr: u64, size: u32, first_seq: u32) -> Self {
        HostReceiver {
            conn,
            base_addr,
            first_seq,
            buffer: vec![0; size as usize],
            ready: first_seq,
            consumed: first_seq,
            granted: first_seq,
        }
    }

    /// Applies what the pipeline wrote over DMA; events of other
    /// connections and other kinds are not this buffer's.
    pub fn apply(&mut self, event: &HostEvent) -> Result<(), HostError> {
        let HostEvent::RxData {
            conn,
            addr,
            notify,
            payload,
        } = event
        else {
            return Ok(());
        };
        if *conn != self.conn {
            return Ok(());
        }
        let size = self.buffer.len() as u64;
        let offset = addr.wrapping_sub(self.base_addr);
        // The mapping is twice the buffer: a write starts in it and no
        // write is longer than the buffer.
        if offset >= 2 * size
            || payload.len() as u64 > size
            || offset + payload.len() as u64 > 2 * size
        {
            return Err(HostError::OutOfBuffer {
                addr: *addr,
                len: payload.len(),
                base: self.base_addr,
                size: size as u32,
            });
        }
        for (i, byte) in payload.iter().enumerate() {
            self.buffer[((offset + i as u64) % size) as usize] = *byte;
        }
        if let Some(seq) = notify {
            if (seq.wrapping_sub(self.ready) as i32) > 0 {
                self.ready = *seq;
            }
        }
        Ok(())
    }

    /// The application reads everything ready.
    pub fn read(&mut self) -> Vec<u8> {
        let size = self.buffer.len() as u32;
        let n = self.ready.wrapping_sub(self.consumed);
        let start = self.consumed.wrapping_sub(self.first_seq);
        self.consumed = self.ready;
        (0..n)
            .map(|i| self.buffer[(start.wrapping_add(i) % size) as usize])
            .collect()
    }

    /// A SYNC handing back the space read since the last one, once it is at
    /// least `threshold` bytes (libTOE's default is a quarter of the
    /// buffer).
    pub fn sync_due(&mut self, threshold: u32) -> Option<HostCommand> {
        let grant = self.consumed.wrapping_sub(self.granted);
        (grant >= threshold.max(1)).then(|| {
            self.granted = self.consumed;
            HostCommand::Sync {
                conn: self.conn,
                rx_grant: grant,
            }
        })
    }

    /// Sequence number up to which data is ready.
    pub fn ready(&self) -> u32 {
        self.ready
    }
}

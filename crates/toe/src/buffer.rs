//! A connection's payload buffer (thesis chapter 3, PAYLOAD-BUFs): a ring
//! of bytes addressed by free-running 32-bit positions, as the protocol
//! stage hands them out (`rx_pos`, `tx_pos`); the index is the position
//! modulo the size, a power of two.

/// One direction's payload ring.
#[derive(Debug, Clone)]
pub struct PayloadBuf {
    bytes: Vec<u8>,
    mask: u32,
}

impl PayloadBuf {
    /// A ring of `size` bytes, rounded up to a power of two.
    pub fn new(size: u32) -> Self {
        let size = size.next_power_of_two();
        PayloadBuf {
            bytes: vec![0; size as usize],
            mask: size - 1,
        }
    }

    pub fn size(&self) -> u32 {
        self.mask + 1
    }

    /// Writes `data` at position `pos` (wrapping around the end).
    pub fn write(&mut self, pos: u32, data: &[u8]) {
        debug_assert!(data.len() <= self.bytes.len());
        let at = (pos & self.mask) as usize;
        let first = data.len().min(self.bytes.len() - at);
        self.bytes[at..at + first].copy_from_slice(&data[..first]);
        self.bytes[..data.len() - first].copy_from_slice(&data[first..]);
    }

    /// Copies `out.len()` bytes from position `pos` into `out`.
    pub fn read(&self, pos: u32, out: &mut [u8]) {
        debug_assert!(out.len() <= self.bytes.len());
        let at = (pos & self.mask) as usize;
        let first = out.len().min(self.bytes.len() - at);
        out[..first].copy_from_slice(&self.bytes[at..at + first]);
        let rest = out.len() - first;
        out[first..].copy_from_slice(&self.bytes[..rest]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_wrap_around() {
        let mut b = PayloadBuf::new(10);
        assert_eq!(b.size(), 16);
        b.write(u32::MAX - 2, b"abcdefgh");
        let mut out = [0u8; 8];
        b.read(u32::MAX - 2, &mut out);
        assert_eq!(&out, b"abcdefgh");
        b.read(1, &mut out[..2]);
        assert_eq!(&out[..2], b"ef");
    }
}

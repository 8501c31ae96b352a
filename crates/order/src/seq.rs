//! TCP sequence-number arithmetic.
//!
//! Sequence numbers are 32-bit and wrap; they are compared with serial-number
//! arithmetic (RFC 1982 section 3.2, as RFC 793 section 3.3 does for TCP):
//! `a < b` when `b - a`, taken modulo 2^32, lies in `1..2^31`. Two numbers
//! exactly 2^31 apart are not ordered by RFC 1982; here they compare as
//! "greater" (the sign of the wrapped difference), which keeps the order
//! total and deterministic for garbage input.

use std::cmp::Ordering;

/// Signed distance from `from` to `to` modulo 2^32 (positive: `to` is later).
#[inline]
pub fn distance(from: u32, to: u32) -> i32 {
    to.wrapping_sub(from) as i32
}

/// RFC 1982 comparison of two sequence numbers.
#[inline]
pub fn compare(a: u32, b: u32) -> Ordering {
    distance(b, a).cmp(&0)
}

/// Turns a stream of 32-bit sequence numbers into 64-bit ones that do not
/// wrap, each taken as the value nearest (in serial arithmetic) to the
/// highest seen so far. Correct as long as consecutive values of one flow are
/// less than 2^31 apart, which TCP's window guarantees.
#[derive(Debug, Clone, Default)]
pub struct Unwrapper {
    highest: Option<i64>,
}

impl Unwrapper {
    pub fn new() -> Self {
        Self::default()
    }

    /// The 64-bit value of `seq`. The first value maps to `2^32 + seq`, so
    /// values before it stay positive.
    pub fn unwrap(&mut self, seq: u32) -> i64 {
        let value = match self.highest {
            None => (1i64 << 32) + i64::from(seq),
            Some(h) => h + i64::from(distance(h as u32, seq)),
        };
        match self.highest {
            Some(h) if h >= value => {}
            _ => self.highest = Some(value),
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_order_across_wrap() {
        assert_eq!(compare(0xffff_fff0, 0x10), Ordering::Less);
        assert_eq!(compare(0x10, 0xffff_fff0), Ordering::Greater);
        assert_eq!(compare(7, 7), Ordering::Equal);
        assert_eq!(distance(0xffff_ffff, 0), 1);
    }

    #[test]
    fn unwrap_is_monotone_across_wrap() {
        let mut u = Unwrapper::new();
        let a = u.unwrap(0xffff_ff00);
        let b = u.unwrap(0x0000_0100);
        let c = u.unwrap(0xffff_ff80); // late packet from before the wrap
        assert_eq!(b - a, 0x200);
        assert_eq!(c - a, 0x80);
    }
}

//! TCP header (RFC 9293 section 3.1) and its options.

use serde::Serialize;

use etherparse::{TcpOptionElement, TcpOptionsIterator};

/// TCP control bits (the low 8 flag bits of byte 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Flags(pub u8);

impl Flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;

    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// The control bits the SRPIC paper (section 3.3) says need immediate
    /// treatment: SYN, FIN, RST, URG, ECE, CWR (everything but ACK and PSH).
    pub fn needs_immediate_delivery(self) -> bool {
        self.0 & !(Self::ACK | Self::PSH) != 0
    }
}

/// What the options area holds, as far as SRPIC cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Options {
    /// No options (data offset 5), or only padding (NOP/EOL).
    None,
    /// Only the timestamp option (RFC 7323), with NOP/EOL padding.
    TimestampOnly,
    /// Any other option (SACK, MSS, window scale, MPTCP, …).
    Other,
    /// The options area was cut by the capture or is malformed.
    Unreadable,
}

/// A checked TCP header view: the 20-byte fixed part is present; the options
/// may be cut short by a capture's snap length (see [`Segment::options`]).
impl Options {
    /// Classifies a captured options area (the bytes after the fixed header,
    /// as far as the capture holds them; `declared` is the length the data
    /// offset gives). etherparse walks the options; an option it does not
    /// know is fine when its length field fits (RFC 9293 section 3.1: every
    /// option but EOL and NOP carries a length).
    pub fn classify(options: &[u8], declared: usize) -> Options {
        if declared == 0 {
            return Options::None;
        }
        if options.len() < declared {
            return Options::Unreadable;
        }
        let mut iter = TcpOptionsIterator::from_slice(&options[..declared]);
        let mut timestamp = false;
        loop {
            let rest = iter.rest();
            match iter.next() {
                None => break,
                Some(Ok(TcpOptionElement::Noop)) => {}
                Some(Ok(TcpOptionElement::Timestamp(..))) => timestamp = true,
                Some(Ok(_)) => return Options::Other,
                // Unknown kind or a length etherparse does not expect: another
                // option if its length field is sound, else unreadable.
                Some(Err(_)) => {
                    return match rest.get(1).map(|&len| usize::from(len)) {
                        Some(len) if len >= 2 && len <= rest.len() => Options::Other,
                        _ => Options::Unreadable,
                    }
                }
            }
        }
        if timestamp {
            Options::TimestampOnly
        } else {
            Options::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(opts: &[u8]) -> Options {
        Options::classify(opts, opts.len())
    }

    #[test]
    fn options_are_classified() {
        let ts = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(classify(&ts), Options::TimestampOnly);
        let sack = [1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(classify(&sack), Options::Other);
        // An option kind etherparse does not know (MPTCP, 30), length sound.
        assert_eq!(classify(&[30, 4, 0, 0]), Options::Other);
        // The timestamp kind with a length of its own: another option.
        assert_eq!(classify(&[8, 4, 0, 0]), Options::Other);
        for bad in [
            &[1, 1, 8, 0][..],
            &[1, 1, 1, 30],
            &[2, 4, 0],
            &[30, 9, 0, 0],
        ] {
            assert_eq!(Options::classify(bad, 4), Options::Unreadable, "{bad:?}");
        }
        // Cut by the capture before the end of the options area.
        assert_eq!(Options::classify(&ts[..4], ts.len()), Options::Unreadable);
        assert_eq!(classify(&[]), Options::None);
        assert_eq!(classify(&[1, 1, 0, 0]), Options::None);
    }

    #[test]
    fn control_bits() {
        assert!(!Flags(Flags::ACK | Flags::PSH).needs_immediate_delivery());
        for bit in [
            Flags::SYN,
            Flags::FIN,
            Flags::RST,
            Flags::URG,
            Flags::ECE,
            Flags::CWR,
        ] {
            assert!(Flags(Flags::ACK | bit).needs_immediate_delivery());
        }
    }
}

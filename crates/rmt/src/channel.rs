//! The mirror and recirculation paths: a packet put on one comes back into
//! the pipeline after a latency, unless the path is full (internal
//! congestion) or its loss model drops it (thesis §5.1.1 "Packet injection
//! mechanisms"; §5.3.1.5 loses a mirror to "internal congestion").
//!
//! Loss is deterministic: a seeded generator, or the ordinals of the packets
//! to drop, so a run repeats exactly. A full path refuses a packet at once;
//! a lossy path loses it at the far end, when it would have re-entered the
//! pipeline (where the TM's congestion drops it).

use std::collections::VecDeque;

use serde::Serialize;

/// Which packets a path loses on top of those it has no room for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Loss {
    /// Loses nothing.
    None,
    /// Loses each packet with `probability`, drawn from a generator seeded
    /// with `seed`.
    Random { probability: f64, seed: u64 },
    /// Loses the packets with these ordinals (1 = the first packet offered).
    Nth(Vec<u64>),
}

/// A path's shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelConfig {
    /// Time from entering the path to re-entering the pipeline.
    pub latency_ns: u64,
    /// Most packets on the path at once; a packet offered to a full path is
    /// lost.
    pub capacity: usize,
    pub loss: Loss,
}

impl ChannelConfig {
    /// A lossless path with room for `capacity` packets.
    pub fn lossless(latency_ns: u64, capacity: usize) -> Self {
        ChannelConfig {
            latency_ns,
            capacity,
            loss: Loss::None,
        }
    }
}

/// What happened on a path so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ChannelCounters {
    pub offered: u64,
    pub delivered: u64,
    pub lost_full: u64,
    pub lost_random: u64,
}

/// Why a path lost a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LossCause {
    Full,
    Loss,
}

/// A path carrying items of type `T`.
#[derive(Debug)]
pub struct Channel<T> {
    config: ChannelConfig,
    in_flight: VecDeque<(u64, Option<LossCause>, T)>,
    rng: SplitMix64,
    counters: ChannelCounters,
}

impl<T> Channel<T> {
    pub fn new(config: ChannelConfig) -> Self {
        let seed = match config.loss {
            Loss::Random { seed, .. } => seed,
            _ => 0,
        };
        Channel {
            config,
            in_flight: VecDeque::new(),
            rng: SplitMix64(seed),
            counters: ChannelCounters::default(),
        }
    }

    /// Offers `item` at time `now`: a full path hands it back at once;
    /// otherwise it arrives at `now + latency`, or is lost then.
    pub fn offer(&mut self, now: u64, item: T) -> Result<(), (LossCause, T)> {
        self.counters.offered += 1;
        let ordinal = self.counters.offered;
        if self.in_flight.len() >= self.config.capacity {
            self.counters.lost_full += 1;
            return Err((LossCause::Full, item));
        }
        let lost = match &self.config.loss {
            Loss::None => false,
            Loss::Random { probability, .. } => self.rng.next_unit() < *probability,
            Loss::Nth(ordinals) => ordinals.contains(&ordinal),
        };
        let fate = lost.then_some(LossCause::Loss);
        self.in_flight
            .push_back((now + self.config.latency_ns, fate, item));
        Ok(())
    }

    /// When the next packet reaches the far end.
    pub fn next_delivery(&self) -> Option<u64> {
        self.in_flight.front().map(|(at, _, _)| *at)
    }

    /// The next packet due by `now`: delivered, or lost (with the cause).
    pub fn deliver(&mut self, now: u64) -> Option<Result<T, (LossCause, T)>> {
        match self.in_flight.front() {
            Some((at, _, _)) if *at <= now => {
                let (_, fate, item) = self.in_flight.pop_front()?;
                Some(match fate {
                    None => {
                        self.counters.delivered += 1;
                        Ok(item)
                    }
                    Some(cause) => {
                        self.counters.lost_random += 1;
                        Err((cause, item))
                    }
                })
            }
            _ => None,
        }
    }

    pub fn counters(&self) -> ChannelCounters {
        self.counters
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a small seeded generator whose
/// sequence never changes with a dependency's version.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_path_loses_and_a_drained_one_accepts_again() {
        let mut c = Channel::new(ChannelConfig::lossless(100, 1));
        assert!(c.offer(0, 'a').is_ok());
        assert_eq!(c.offer(10, 'b'), Err((LossCause::Full, 'b')));
        assert_eq!(c.deliver(99), None);
        assert_eq!(c.deliver(100), Some(Ok('a')));
        assert!(c.offer(100, 'c').is_ok());
        assert_eq!(c.counters().lost_full, 1);
    }

    #[test]
    fn nth_loss_drops_exactly_those_ordinals() {
        let mut c = Channel::new(ChannelConfig {
            latency_ns: 0,
            capacity: 10,
            loss: Loss::Nth(vec![2]),
        });
        for i in 0..3 {
            c.offer(0, i).unwrap();
        }
        let fates: Vec<_> = std::iter::from_fn(|| c.deliver(0)).collect();
        assert_eq!(fates, [Ok(0), Err((LossCause::Loss, 1)), Ok(2)]);
    }

    #[test]
    fn random_loss_repeats_with_its_seed() {
        let run = || {
            let mut c = Channel::new(ChannelConfig {
                latency_ns: 0,
                capacity: usize::MAX,
                loss: Loss::Random {
                    probability: 0.3,
                    seed: 7,
                },
            });
            for i in 0..1000 {
                c.offer(0, i).unwrap();
            }
            std::iter::from_fn(|| c.deliver(0))
                .map(|f| f.is_ok())
                .collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        let lost = a.iter().filter(|k| !**k).count();
        assert!((200..400).contains(&lost), "{lost} of 1000 lost at p=0.3");
    }
}

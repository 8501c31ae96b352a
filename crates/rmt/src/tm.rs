//! The traffic manager between ingress and egress (thesis §5.1.1): finite
//! queues that drop on overflow (tail drop), served round robin by the
//! egress pipeline at one packet per slot. Egress itself never drops for
//! want of room: the TM only hands it a packet when it can take one.

use std::collections::VecDeque;

use serde::Serialize;

/// What the TM did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TmCounters {
    pub enqueued: u64,
    pub dropped: u64,
    pub dequeued: u64,
}

/// Queues of items of type `T`.
#[derive(Debug)]
pub struct TrafficManager<T> {
    queues: Vec<VecDeque<(u64, T)>>,
    capacity: usize,
    next_queue: usize,
    counters: TmCounters,
}

impl<T> TrafficManager<T> {
    /// `queues` queues (at least one) of `capacity` packets each.
    pub fn new(queues: usize, capacity: usize) -> Self {
        TrafficManager {
            queues: (0..queues.max(1)).map(|_| VecDeque::new()).collect(),
            capacity,
            next_queue: 0,
            counters: TmCounters::default(),
        }
    }

    /// Enqueues at `now` into `queue` (an unknown queue is the last one);
    /// a full queue drops the packet and hands it back.
    pub fn enqueue(&mut self, now: u64, queue: usize, item: T) -> Result<(), T> {
        let q = queue.min(self.queues.len() - 1);
        if self.queues[q].len() >= self.capacity {
            self.counters.dropped += 1;
            return Err(item);
        }
        self.counters.enqueued += 1;
        self.queues[q].push_back((now, item));
        Ok(())
    }

    /// The earliest time a queued packet arrived, if any is queued.
    pub fn earliest(&self) -> Option<u64> {
        self.queues.iter().fold(None, |earliest, q| {
            match (earliest, q.front().map(|(at, _)| *at)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        })
    }

    /// The next packet, round robin over the queues that hold one that had
    /// arrived by `now`.
    pub fn dequeue(&mut self, now: u64) -> Option<T> {
        let n = self.queues.len();
        for step in 0..n {
            let q = (self.next_queue + step) % n;
            if self.queues[q].front().is_some_and(|(at, _)| *at <= now) {
                self.next_queue = (q + 1) % n;
                self.counters.dequeued += 1;
                return self.queues[q].pop_front().map(|(_, item)| item);
            }
        }
        None
    }

    pub fn counters(&self) -> TmCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_the_others_still_accept() {
        let mut tm = TrafficManager::new(2, 2);
        assert!(tm.enqueue(0, 0, 1).is_ok());
        assert!(tm.enqueue(0, 0, 2).is_ok());
        assert_eq!(tm.enqueue(0, 0, 3), Err(3));
        assert!(tm.enqueue(0, 1, 4).is_ok());
        assert_eq!(tm.counters().dropped, 1);
    }

    #[test]
    fn queues_are_served_round_robin() {
        let mut tm = TrafficManager::new(2, 8);
        for i in 0..3 {
            tm.enqueue(0, 0, i).unwrap();
        }
        tm.enqueue(0, 1, 10).unwrap();
        let order: Vec<i32> = std::iter::from_fn(|| tm.dequeue(0)).collect();
        assert_eq!(order, [0, 10, 1, 2]);
    }
}

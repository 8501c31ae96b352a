//! Sequencing and reordering (thesis section 4.3.2, Fig. 4.7): every item
//! entering a parallel part of the pipeline takes a ticket, consecutive per
//! stream (a flow group), and a [`Reorder`] buffer in front of a stage that
//! needs order admits items strictly in ticket order, whatever order the
//! parallel replicas finished them in.

use std::collections::BTreeMap;

/// Hands out consecutive tickets per stream.
#[derive(Debug, Clone)]
pub struct Sequencer {
    next: Vec<u64>,
}

impl Sequencer {
    pub fn new(streams: usize) -> Self {
        Sequencer {
            next: vec![0; streams.max(1)],
        }
    }

    pub fn take(&mut self, stream: usize) -> u64 {
        let t = self.next[stream];
        self.next[stream] += 1;
        t
    }
}

/// Releases items in ticket order: an item waits until every lower ticket
/// has been released. Each ticket must be pushed exactly once (a stage
/// that drops an item pushes a placeholder, so no gap stalls the stream).
#[derive(Debug)]
pub struct Reorder<T> {
    next: u64,
    held: BTreeMap<u64, T>,
}

impl<T> Default for Reorder<T> {
    fn default() -> Self {
        Reorder {
            next: 0,
            held: BTreeMap::new(),
        }
    }
}

impl<T> Reorder<T> {
    /// Holds `item` under `ticket`. A ticket already released or held is
    /// a caller's bug and is refused.
    pub fn push(&mut self, ticket: u64, item: T) -> Result<(), T> {
        if ticket < self.next || self.held.contains_key(&ticket) {
            return Err(item);
        }
        self.held.insert(ticket, item);
        Ok(())
    }

    /// The next item in ticket order, if it has arrived.
    pub fn pop(&mut self) -> Option<T> {
        let item = self.held.remove(&self.next)?;
        self.next += 1;
        Some(item)
    }

    /// Items waiting for a lower ticket.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever order the tickets come back in, they leave in order.
        #[test]
        fn any_arrival_order_leaves_in_ticket_order(
            order in Just((0..200u64).collect::<Vec<_>>()).prop_shuffle()
        ) {
            let mut r = Reorder::default();
            let mut out = Vec::new();
            for t in order {
                r.push(t, t).unwrap();
                while let Some(x) = r.pop() {
                    out.push(x);
                }
            }
            prop_assert_eq!(out, (0..200).collect::<Vec<_>>());
            prop_assert_eq!(r.held(), 0);
        }
    }

    #[test]
    fn tickets_are_per_stream_and_duplicates_are_refused() {
        let mut s = Sequencer::new(2);
        assert_eq!((s.take(0), s.take(0), s.take(1)), (0, 1, 0));
        let mut r = Reorder::default();
        r.push(1, 'b').unwrap();
        assert_eq!(r.pop(), None);
        r.push(0, 'a').unwrap();
        assert_eq!((r.pop(), r.pop()), (Some('a'), Some('b')));
        assert_eq!(r.push(0, 'x'), Err('x'));
    }
}

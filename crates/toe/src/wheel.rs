//! The flow scheduler (thesis section 4.3.4, after Carousel): flows with a
//! rate limit wait in a time wheel, in the slot of their next transmission
//! time, and are released when that slot's time comes; flows without one
//! bypass the wheel. Released and unlimited flows are served round-robin,
//! so the scheduler is work-conserving for uncongested flows.
//!
//! Only flows with something to send and room in their window are queued
//! (the caller's job, as in FlexTOE), so an idle flow costs nothing. The
//! order of flows within one slot is their insertion order (Carousel does
//! not promise one; FlexTOE's hardware queues do not keep it).
//!
//! Times are nanoseconds on the caller's clock. A slot covers
//! `[i * slot_ns, (i + 1) * slot_ns)`; it is released once the clock is in
//! it, so a flow may leave up to one slot before its time and never a slot
//! after it, if the caller advances the wheel at least once per slot. A
//! time beyond the horizon goes to the last slot (Carousel's clamp): the
//! caller finds it early and queues it again.

use std::collections::VecDeque;

/// A flow's identifier (the connection index).
pub type FlowId = u32;

/// A time wheel of `slots` slots of `slot_ns` each, and the round-robin
/// queue behind it.
#[derive(Debug)]
pub struct Wheel {
    slot_ns: u64,
    slots: Vec<Vec<FlowId>>,
    /// The absolute number of the first slot not yet released.
    cursor: u64,
    /// Flows in the wheel.
    timed: usize,
    ready: VecDeque<FlowId>,
}

impl Wheel {
    /// Panics on zero sizes: they are constants of the caller, not input.
    pub fn new(slot_ns: u64, slots: usize) -> Self {
        assert!(
            slot_ns > 0 && slots > 1,
            "a wheel needs slots and a slot time"
        );
        Wheel {
            slot_ns,
            slots: vec![Vec::new(); slots],
            cursor: 0,
            timed: 0,
            ready: VecDeque::new(),
        }
    }

    pub fn slot_ns(&self) -> u64 {
        self.slot_ns
    }

    /// How far ahead a time can be placed exactly.
    pub fn horizon_ns(&self) -> u64 {
        self.slot_ns * (self.slots.len() as u64 - 1)
    }

    /// Whether a flow due at `at_ns` may go at `now_ns`: its slot began.
    pub fn due(&self, at_ns: u64, now_ns: u64) -> bool {
        at_ns / self.slot_ns <= now_ns / self.slot_ns
    }

    /// Queues a rate-limited flow for its next transmission at `at_ns`.
    /// A time in a slot already released is due: the flow joins the
    /// round-robin queue at once.
    pub fn schedule_at(&mut self, flow: FlowId, at_ns: u64) {
        if at_ns / self.slot_ns < self.cursor {
            self.ready.push_back(flow);
            return;
        }
        let last = self.cursor + self.slots.len() as u64 - 1;
        let slot = (at_ns / self.slot_ns).min(last);
        let n = self.slots.len() as u64;
        self.slots[(slot % n) as usize].push(flow);
        self.timed += 1;
    }

    /// Queues a flow with no rate limit: round-robin, behind the others.
    pub fn schedule_now(&mut self, flow: FlowId) {
        self.ready.push_back(flow);
    }

    /// Moves every flow whose slot began by `now_ns` to the round-robin
    /// queue, earlier slots first.
    pub fn advance(&mut self, now_ns: u64) {
        let now_slot = now_ns / self.slot_ns;
        if self.timed == 0 {
            self.cursor = self.cursor.max(now_slot + 1);
            return;
        }
        let n = self.slots.len() as u64;
        // After a long pause every slot is due: one pass over the ring.
        let last = now_slot.min(self.cursor + n - 1);
        while self.cursor <= last {
            let slot = &mut self.slots[(self.cursor % n) as usize];
            self.timed -= slot.len();
            self.ready.extend(slot.drain(..));
            self.cursor += 1;
        }
        self.cursor = self.cursor.max(now_slot + 1);
    }

    /// The next flow to serve, round-robin.
    pub fn next_ready(&mut self) -> Option<FlowId> {
        self.ready.pop_front()
    }

    /// Flows waiting in the round-robin queue.
    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }

    /// Flows waiting in the wheel.
    pub fn timed_len(&self) -> usize {
        self.timed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(w: &mut Wheel) -> Vec<FlowId> {
        std::iter::from_fn(|| w.next_ready()).collect()
    }

    #[test]
    fn flows_leave_in_slot_order_and_not_before_their_slot() {
        let mut w = Wheel::new(1_000, 16);
        w.schedule_at(3, 5_500);
        w.schedule_at(1, 2_000);
        w.schedule_at(2, 2_999);
        w.schedule_at(4, 9_000);
        w.advance(1_999);
        assert!(drain(&mut w).is_empty(), "slot 2 has not begun");
        w.advance(2_000);
        assert_eq!(drain(&mut w), [1, 2], "one slot, insertion order");
        w.advance(5_999);
        assert_eq!(drain(&mut w), [3]);
        assert!(!w.due(9_000, 8_999) && w.due(9_000, 9_000));
        w.advance(20_000);
        assert_eq!(drain(&mut w), [4]);
        assert_eq!(w.timed_len(), 0);
    }

    #[test]
    fn slot_granularity_rounds_down_to_the_slot_start() {
        let mut w = Wheel::new(10_000, 8);
        w.schedule_at(7, 19_999);
        w.advance(9_999);
        assert_eq!(drain(&mut w), Vec::<FlowId>::new());
        // 19999 is in the slot [10000, 20000): it goes at 10000, up to one
        // slot early, never late.
        w.advance(10_000);
        assert_eq!(drain(&mut w), [7]);
    }

    #[test]
    fn past_and_far_times_are_clamped_to_the_wheel() {
        let mut w = Wheel::new(1_000, 4);
        w.advance(10_000);
        // In the past: due at once.
        w.schedule_at(1, 0);
        assert_eq!(w.ready_len(), 1);
        // Beyond the horizon (3 slots): the last slot, released early.
        w.schedule_at(2, 1_000_000);
        w.advance(11_000);
        assert_eq!(drain(&mut w), [1]);
        w.advance(14_000);
        assert_eq!(drain(&mut w), [2]);
        assert_eq!(w.horizon_ns(), 3_000);
    }

    #[test]
    fn a_long_pause_releases_everything_once() {
        let mut w = Wheel::new(1_000, 4);
        for f in 0..4 {
            w.schedule_at(f, u64::from(f) * 1_000);
        }
        w.advance(1_000_000_000);
        assert_eq!(drain(&mut w), [0, 1, 2, 3]);
        // A flow due in the slot the clock is in goes at once.
        w.schedule_at(9, 1_000_000_500);
        w.advance(1_000_000_999);
        assert_eq!(drain(&mut w), [9]);
    }

    /// Work conservation without starvation: flows that are served and
    /// queued again go behind the others, and a released rate-limited
    /// flow joins the same rotation instead of waiting for it to drain.
    #[test]
    fn round_robin_serves_every_flow_and_released_flows_join_it() {
        let mut w = Wheel::new(1_000, 64);
        for f in 0..3 {
            w.schedule_now(f);
        }
        w.schedule_at(10, 3_000);
        let mut served = [0u32; 11];
        let mut order = Vec::new();
        for step in 0..30u64 {
            w.advance(step * 500);
            let Some(f) = w.next_ready() else {
                continue;
            };
            served[f as usize] += 1;
            order.push(f);
            if f < 3 {
                // An unlimited flow with more to send: back in the queue.
                w.schedule_now(f);
            }
        }
        assert_eq!(served[10], 1, "{order:?}");
        let pos = order.iter().position(|&f| f == 10).unwrap();
        // Released at 3000 ns (step 6), it waits at most one rotation.
        assert!(pos <= 6 + 3, "{order:?}");
        let rr: Vec<u32> = served[..3].to_vec();
        assert!(
            rr.iter().max().unwrap() - rr.iter().min().unwrap() <= 1,
            "{rr:?}"
        );
    }
}

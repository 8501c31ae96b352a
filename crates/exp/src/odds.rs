//! Exact odds of flows colliding on queues when each flow's queue is uniform
//! and independent (random source ports, a well-mixed hash, an equal table).
//! The functions live in `srap::odds` (with the exact distribution of the
//! most-loaded core); this module keeps the demo's name for them.

pub use srap::odds::collision_free;

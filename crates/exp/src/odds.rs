//! Exact odds of flows colliding on queues when each flow's queue is uniform
//! and independent (random source ports, a well-mixed hash, an equal table).

/// Probability that `flows` flows land on `queues` queues with no two sharing
/// one: `prod_{i<flows} (queues - i) / queues` (the birthday problem).
/// 16 flows on 32 queues: 0.0104 (SRAP paper, section 2).
pub fn collision_free(flows: u32, queues: u32) -> f64 {
    if flows > queues {
        return 0.0;
    }
    (0..flows).fold(1.0, |p, i| p * f64::from(queues - i) / f64::from(queues))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_flows_on_thirty_two_queues_is_about_one_percent() {
        let p = collision_free(16, 32);
        assert!((p - 0.0104).abs() < 0.00005, "{p}");
    }

    #[test]
    fn edge_cases() {
        assert_eq!(collision_free(1, 32), 1.0);
        assert_eq!(collision_free(0, 4), 1.0);
        assert_eq!(collision_free(5, 4), 0.0);
    }
}

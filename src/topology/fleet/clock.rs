//! An agent's clock against the controller's, from NTP-style exchanges.

/// An agent's realtime clock against the controller's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClockSync {
    /// Agent clock minus controller clock, seconds.
    pub offset_s: f64,
    /// Round trip of the exchange the offset came from, seconds; the offset
    /// is exact to within half of it.
    pub rtt_s: f64,
}

impl ClockSync {
    /// The controller-clock time (ns since the epoch) of an agent timestamp.
    pub fn to_controller_ns(&self, agent_ns: u64) -> i128 {
        agent_ns as i128 - (self.offset_s * 1e9).round() as i128
    }
    /// The agent-clock time of a controller timestamp.
    pub fn to_agent_ns(&self, controller_ns: u64) -> u64 {
        (controller_ns as i128 + (self.offset_s * 1e9).round() as i128).max(0) as u64
    }
}

/// Picks the lowest-RTT exchange of (controller send, agent clock,
/// controller receive) triples, all in ns.
pub fn best_clock_sample(samples: &[(u64, u64, u64)]) -> Option<ClockSync> {
    samples
        .iter()
        .filter(|(t0, _, t1)| t1 >= t0)
        .min_by_key(|(t0, _, t1)| t1 - t0)
        .map(|&(t0, ta, t1)| {
            let mid = (t0 as i128 + t1 as i128) / 2;
            ClockSync {
                offset_s: (ta as i128 - mid) as f64 / 1e9,
                rtt_s: (t1 - t0) as f64 / 1e9,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_rtt_sample_wins() {
        // Agent 5 ms ahead; the second exchange had the shortest round trip.
        let s = [
            (1_000_000_000, 1_009_000_000, 1_010_000_000),
            (2_000_000_000, 2_005_500_000, 2_001_000_000),
            (3_000_000_000, 3_007_000_000, 3_004_000_000),
        ];
        let c = best_clock_sample(&s).unwrap();
        assert!((c.offset_s - 0.005).abs() < 1e-9, "{c:?}");
        assert!((c.rtt_s - 0.001).abs() < 1e-9);
        assert_eq!(c.to_controller_ns(2_005_500_000), 2_000_500_000);
        assert_eq!(c.to_agent_ns(2_000_500_000), 2_005_500_000);
        // A sample whose clock went backwards is ignored.
        assert!(best_clock_sample(&[(5, 0, 4)]).is_none());
    }
}

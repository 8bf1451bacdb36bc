//! Load classification and conditional throughput of RFC 9971 (MLRsearch),
//! appendices A and B: given every trial measured at one load and one goal,
//! is the load a lower bound, an upper bound, or undecided; and what
//! forwarding rate is typical at a lower bound.
//!
//! Written from the RFC's definitions, checked against its worked example
//! (the tests below reproduce its tables).

/// Slack for sums of float durations (0.1 × 3 is not 0.3).
const EPS: f64 = 1e-9;

/// One trial at a load, as classification sees it. The trial effective
/// duration is taken equal to the intended duration (RFC 9971 allows this;
/// it keeps sums exact when the runner measures 0.999 s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LoadTrial {
    pub duration_s: f64,
    pub loss_ratio: f64,
    /// What the trial proves at this load.
    pub evidence: Evidence,
}

/// What a trial proves at the load it is recorded at. A trial the tester
/// could not offer in full ran at less than the load asked: its loss
/// above a goal holds at the load asked too (a DUT losing at less loses at
/// more), its loss within a goal only at what was offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Evidence {
    /// The trial ran at this load: it counts for every goal.
    Full,
    /// Counts only for goals it fails (high-loss): recorded at the load
    /// asked, above what the tester offered.
    HighLossOnly,
    /// Counts only for goals it upholds (low-loss): recorded at or below
    /// what the tester offered.
    LowLossOnly,
}

impl LoadTrial {
    pub fn full(duration_s: f64, loss_ratio: f64) -> Self {
        LoadTrial {
            duration_s,
            loss_ratio,
            evidence: Evidence::Full,
        }
    }

    /// Whether this trial says anything about this goal at its load.
    pub fn applies(&self, c: &Criterion) -> bool {
        match self.evidence {
            Evidence::Full => true,
            Evidence::HighLossOnly => self.loss_ratio > c.loss_ratio,
            Evidence::LowLossOnly => self.loss_ratio <= c.loss_ratio,
        }
    }
}

/// The attributes of a search goal that classification needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Criterion {
    /// Goal Loss Ratio: a trial above it is high-loss.
    pub loss_ratio: f64,
    /// Goal Exceed Ratio: the share of the duration sum high-loss trials may
    /// take at a lower bound.
    pub exceed_ratio: f64,
    /// Goal Final Trial Duration: trials at least this long are full-length.
    pub final_trial_duration_s: f64,
    /// Goal Duration Sum: how much full-length trial time decides a load.
    pub duration_sum_s: f64,
}

/// What a load is for a goal, given the trials so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoadClass {
    /// Certain to uphold the goal whatever the rest of the duration sum shows.
    Lower,
    /// Certain to fail the goal whatever the rest of the duration sum shows.
    Upper,
    /// Not enough trials yet.
    Undecided,
}

#[derive(Debug, Default, Clone, Copy)]
struct Sums {
    full_low: f64,
    full_high: f64,
    short_low: f64,
    short_high: f64,
}

fn sums(trials: &[LoadTrial], c: &Criterion) -> Sums {
    let mut s = Sums::default();
    for t in trials.iter().filter(|t| t.applies(c)) {
        let full = t.duration_s >= c.final_trial_duration_s - EPS;
        let high = t.loss_ratio > c.loss_ratio;
        match (full, high) {
            (true, false) => s.full_low += t.duration_s,
            (true, true) => s.full_high += t.duration_s,
            (false, false) => s.short_low += t.duration_s,
            (false, true) => s.short_high += t.duration_s,
        }
    }
    s
}

/// RFC 9971 appendix A. Short trials count: a short high-loss trial counts
/// as high-loss unless balanced by short low-loss time (scaled by the exceed
/// ratio); short low-loss trials never make a lower bound on their own.
pub(crate) fn classify(trials: &[LoadTrial], c: &Criterion) -> LoadClass {
    let s = sums(trials, c);
    let exceed_coefficient = c.exceed_ratio / (1.0 - c.exceed_ratio);
    let balancing = s.short_low * exceed_coefficient;
    let positive_excess = (s.short_high - balancing).max(0.0);
    let effective_high = s.full_high + positive_excess;
    let effective_full = s.full_low + effective_high;
    let effective_whole = effective_full.max(c.duration_sum_s);
    let quantile = effective_whole * c.exceed_ratio;
    // Pessimistic: all the missing time turns out high-loss.
    let pessimistic_high = effective_whole - s.full_low;
    let pessimistic_is_lower = pessimistic_high <= quantile + EPS;
    let optimistic_is_lower = effective_high <= quantile + EPS;
    match (optimistic_is_lower, pessimistic_is_lower) {
        (true, true) => LoadClass::Lower,
        (false, false) => LoadClass::Upper,
        _ => LoadClass::Undecided,
    }
}

/// RFC 9971 appendix B: the load times the forwarding ratio of the trial at
/// the (1 − exceed ratio) quantile of full-length trials sorted by loss.
/// Missing duration (less than the sum measured) counts as total loss.
pub(crate) fn conditional_throughput(load_pps: f64, trials: &[LoadTrial], c: &Criterion) -> f64 {
    let s = sums(trials, c);
    let mut full: Vec<LoadTrial> = trials
        .iter()
        .copied()
        .filter(|t| t.applies(c) && t.duration_s >= c.final_trial_duration_s - EPS)
        .collect();
    full.sort_by(|a, b| a.loss_ratio.total_cmp(&b.loss_ratio));
    let whole = (s.full_low + s.full_high).max(c.duration_sum_s);
    let mut remaining = whole * (1.0 - c.exceed_ratio);
    let mut quantile_loss: Option<f64> = None;
    for t in &full {
        if quantile_loss.is_none() || remaining > EPS {
            quantile_loss = Some(t.loss_ratio);
            remaining -= t.duration_s;
        } else {
            break;
        }
    }
    let q = match quantile_loss {
        Some(q) if remaining <= EPS => q,
        // Ran out of trials before the quantile: the missing time is loss.
        _ => 1.0,
    };
    load_pps * (1.0 - q)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The four goals of RFC 9971 appendix C ("Example Search").
    fn goals() -> [(&'static str, Criterion); 4] {
        let g = |f, d, l, e| Criterion {
            final_trial_duration_s: f,
            duration_sum_s: d,
            loss_ratio: l,
            exceed_ratio: e,
        };
        [
            ("RFC2544", g(60.0, 60.0, 0.0, 0.0)),
            ("TST009", g(60.0, 120.0, 0.0, 0.5)),
            ("1s final", g(1.0, 120.0, 0.005, 0.5)),
            ("20% exceed", g(60.0, 60.0, 0.005, 0.2)),
        ]
    }

    fn add(trials: &mut Vec<LoadTrial>, n: usize, duration_s: f64, loss_ratio: f64) {
        trials.extend((0..n).map(|_| LoadTrial::full(duration_s, loss_ratio)));
    }

    /// The six points in time of the RFC's example and the classification
    /// rows of its tables (goal order as in `goals`).
    #[test]
    fn rfc9971_example_classification_tables() {
        use LoadClass::*;
        let mut trials = Vec::new();
        let expect_at = |trials: &Vec<LoadTrial>, point: u32, want: [LoadClass; 4]| {
            for ((name, c), want) in goals().iter().zip(want) {
                assert_eq!(classify(trials, c), want, "point {point}, goal {name}");
            }
        };
        add(&mut trials, 59, 1.0, 0.0);
        expect_at(&trials, 1, [Undecided, Undecided, Undecided, Undecided]);
        add(&mut trials, 1, 1.0, 0.01);
        expect_at(&trials, 2, [Upper, Undecided, Undecided, Undecided]);
        add(&mut trials, 59, 1.0, 0.01);
        expect_at(&trials, 3, [Upper, Undecided, Undecided, Upper]);
        add(&mut trials, 1, 1.0, 0.0);
        expect_at(&trials, 4, [Upper, Undecided, Lower, Upper]);
        // Points 5 and 6: the RFC's tables label the load a Lower Bound for
        // "20% exceed", yet their own exceed ratios (42.857 %, 27.273 %) are
        // above the goal's 20 % and appendix A's code gives Upper Bound. We
        // follow the normative code; every other cell matches the tables.
        add(&mut trials, 1, 60.0, 0.001);
        expect_at(&trials, 5, [Upper, Undecided, Lower, Upper]);
        add(&mut trials, 1, 60.0, 0.0);
        expect_at(&trials, 6, [Upper, Lower, Lower, Upper]);

        // "Conditional Throughput Computations" at one million frames/s:
        // goals 2 and 3 get 1 Mpps, goal 4 (20 % exceed) 999 kpps.
        let g = goals();
        let ct = |i: usize| conditional_throughput(1e6, &trials, &g[i].1);
        assert!((ct(1) - 1e6).abs() < 1e-6, "{}", ct(1));
        assert!((ct(2) - 1e6).abs() < 1e-6, "{}", ct(2));
        assert!((ct(3) - 999e3).abs() < 1e-6, "{}", ct(3));
    }

    #[test]
    fn one_full_trial_decides_when_the_sum_is_one_trial() {
        let c = Criterion {
            loss_ratio: 0.0,
            exceed_ratio: 0.5,
            final_trial_duration_s: 30.0,
            duration_sum_s: 30.0,
        };
        let good = [LoadTrial::full(30.0, 0.0)];
        let bad = [LoadTrial::full(30.0, 1e-6)];
        assert_eq!(classify(&good, &c), LoadClass::Lower);
        assert_eq!(classify(&bad, &c), LoadClass::Upper);
        assert_eq!(classify(&[], &c), LoadClass::Undecided);
        // A short lossless trial cannot make a lower bound on its own.
        let short = [LoadTrial::full(1.0, 0.0)];
        assert_eq!(classify(&short, &c), LoadClass::Undecided);
        // Missing full-length time counts as loss in the throughput.
        assert_eq!(conditional_throughput(1e6, &short, &c), 0.0);
        assert_eq!(conditional_throughput(1e6, &good, &c), 1e6);
    }

    #[test]
    fn eleven_seconds_decide_a_21_second_sum_at_half_exceed() {
        // CSIT's defaults: 1 s trials, 21 s sum, exceed ratio 0.5.
        let c = Criterion {
            loss_ratio: 0.0,
            exceed_ratio: 0.5,
            final_trial_duration_s: 1.0,
            duration_sum_s: 21.0,
        };
        let mut t = Vec::new();
        add(&mut t, 10, 1.0, 0.0);
        assert_eq!(classify(&t, &c), LoadClass::Undecided);
        add(&mut t, 1, 1.0, 0.0);
        assert_eq!(classify(&t, &c), LoadClass::Lower);
        let mut t = Vec::new();
        add(&mut t, 10, 1.0, 0.5);
        assert_eq!(classify(&t, &c), LoadClass::Undecided);
        add(&mut t, 1, 1.0, 0.5);
        assert_eq!(classify(&t, &c), LoadClass::Upper);
    }

    /// A short trial recorded at the load asked proves only loss there;
    /// recorded at what was offered, only its passes.
    #[test]
    fn partial_evidence_counts_only_where_it_holds() {
        let ndr = Criterion {
            loss_ratio: 0.0,
            exceed_ratio: 0.0,
            final_trial_duration_s: 1.0,
            duration_sum_s: 1.0,
        };
        let pdr = Criterion {
            loss_ratio: 0.005,
            ..ndr
        };
        let asked = [LoadTrial {
            evidence: Evidence::HighLossOnly,
            ..LoadTrial::full(1.0, 0.001)
        }];
        assert_eq!(classify(&asked, &ndr), LoadClass::Upper);
        assert_eq!(classify(&asked, &pdr), LoadClass::Undecided);
        let offered = [LoadTrial {
            evidence: Evidence::LowLossOnly,
            ..asked[0]
        }];
        assert_eq!(classify(&offered, &ndr), LoadClass::Undecided);
        assert_eq!(classify(&offered, &pdr), LoadClass::Lower);
        assert_eq!(conditional_throughput(1e6, &offered, &pdr), 999e3);
    }
}

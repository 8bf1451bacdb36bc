//! Tests of latency under load: phases and the probe session.

use super::*;
use crate::results::CheckScope;

fn check(ns: &str, tx: bool, application: u64, kernel: u64) -> CrossCheck {
    let mut c = CrossCheck::new("gen: datagrams sent vs kernel", application, kernel);
    c.scope = Some(CheckScope {
        netns: (ns.into(), 1),
        tx,
    });
    c
}

fn sample(seq: u32, client_tx: u64, client_rx: u64, resp: u64) -> ProbeSample {
    ProbeSample(seq, client_tx, client_rx, resp, resp + 1, seq + 1, 0)
}

#[test]
fn probes_are_counted_within_the_counters_span_only() {
    let s = [
        sample(0, 5, 9, 7),    // before the span
        sample(1, 10, 14, 12), // within
        sample(2, 20, 0, 0),   // within, lost
        sample(3, 28, 33, 31), // sent within, answered after
        sample(4, 40, 44, 42), // after
    ];
    let t = probes_within(&s, (10, 30), (10, 30));
    assert_eq!(
        t,
        ProbeTraffic {
            client_tx: 3,
            client_rx: 1,
            resp_rx: 1,
            resp_tx: 1,
        }
    );
}

#[test]
fn the_probes_explain_the_lab_figures_and_nothing_more() {
    let (gen, sink) = (("gen".to_string(), 1), ("sink".to_string(), 1));
    let own = ProbeTraffic {
        client_tx: 331,
        client_rx: 330,
        resp_rx: 330,
        resp_tx: 330,
    };
    // The lab's figures (udp load of 7314 datagrams, 3 s, 10 ms probes).
    let mut checks = vec![
        check("gen", true, 7314, 7645),
        check("sink", false, 7314, 7644),
    ];
    assert!(
        checks.iter().all(|c| c.flagged),
        "4.5 % off without the probes"
    );
    account_probes(&mut checks, &gen, &sink, &own);
    for c in &checks {
        assert!(!c.flagged, "{c:?}");
        assert!(c.what.contains("latency probe packets"), "{}", c.what);
    }
    assert_eq!((checks[0].application, checks[1].application), (7645, 7644));
    // A real disagreement still shows: 300 more than load and probes.
    let mut checks = vec![check("gen", true, 7314, 7945)];
    account_probes(&mut checks, &gen, &sink, &own);
    assert!(checks[0].flagged, "{:?}", checks[0]);
    // Probes of another namespace do not explain this one's counters.
    let mut checks = vec![check("gen", true, 7314, 7645)];
    account_probes(&mut checks, &("other".to_string(), 1), &sink, &own);
    assert!(checks[0].flagged && checks[0].application == 7314);
}

//! Tests of the UDP receiver's counting.

use super::*;

#[test]
fn polls_only_while_datagrams_come_densely() {
    let us = Duration::from_micros;
    // 200 kpps: one datagram every 5 µs, or 64 after a 300 µs sleep.
    assert!(dense(1, us(5)));
    assert!(dense(64, us(300)));
    // 1 kpps: one datagram a millisecond sleeps between them.
    assert!(!dense(1, us(1000)));
    assert!(!dense(1, us(2000)));
    // 5 kpps polls; at the threshold, 2 kpps does.
    assert!(dense(1, us(200)));
    assert!(dense(1, us(500)));
}

#[test]
fn in_order_no_loss() {
    let mut t = FlowTracker::default();
    for s in 0..10_000 {
        t.on_seq(s);
    }
    assert_eq!(
        (t.unique(), t.missing(), t.reordered(), t.duplicates()),
        (10_000, 0, 0, 0)
    );
}

#[test]
fn gaps_are_loss() {
    let mut t = FlowTracker::default();
    for s in (0..100).filter(|s| s % 10 != 3) {
        t.on_seq(s);
    }
    assert_eq!(t.missing(), 10);
    assert_eq!(t.reordered(), 0);
}

#[test]
fn reordered_is_not_loss_and_duplicates_are_counted_apart() {
    let mut t = FlowTracker::default();
    for s in [0, 1, 3, 2, 4, 4, 5, 1] {
        t.on_seq(s);
    }
    assert_eq!(t.unique(), 6);
    assert_eq!(t.missing(), 0);
    assert_eq!(t.reordered(), 1);
    assert_eq!(t.duplicates(), 2);
}

#[test]
fn big_jump_then_late_packets() {
    let mut t = FlowTracker::default();
    t.on_seq(0);
    t.on_seq(10 * WINDOW);
    assert_eq!(t.missing(), 10 * WINDOW - 1);
    t.on_seq(10 * WINDOW - 1); // late, inside the window
    assert_eq!(t.reordered(), 1);
    t.on_seq(10 * WINDOW - 1);
    assert_eq!(t.duplicates(), 1);
    t.on_seq(5); // very late, outside the window
    assert_eq!(t.missing(), 10 * WINDOW - 3);
}

#[test]
fn loss_per_interval_carries_late_fills() {
    let mut t = FlowTracker::default();
    let mut iv = Intervals::default();
    let at = |t: &FlowTracker| Totals {
        missing: t.missing(),
        ..Default::default()
    };
    t.on_seq(0);
    t.on_seq(2);
    assert_eq!(iv.sample(at(&t), 0.0, 1.0, 0).lost, 1);
    t.on_seq(1); // fills the gap of the previous interval
    t.on_seq(3);
    assert_eq!(iv.sample(at(&t), 1.0, 2.0, 0).lost, 0);
    t.on_seq(6);
    // Two new gaps, one absorbed by the earlier late fill.
    assert_eq!(iv.sample(at(&t), 2.0, 3.0, 0).lost, 1);
}

#[test]
fn trackers_of_one_flow_merge() {
    let (mut a, mut b) = (FlowTracker::default(), FlowTracker::default());
    for s in [0, 2, 4] {
        a.on_seq(s);
    }
    for s in [1, 3] {
        b.on_seq(s);
    }
    a.absorb(&b);
    assert_eq!((a.unique(), a.missing()), (5, 0));
}

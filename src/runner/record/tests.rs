//! Tests of the run's record: cross-checks of sent and received counts.

use super::*;

fn sent(app: u64, tx_packets: u64, tx_dropped: u64) -> CrossCheck {
    let mut c = CrossCheck::new("gen: sent", app, tx_packets + tx_dropped);
    refused_frames_sent_again(&mut c, tx_packets);
    c
}

#[test]
fn a_count_between_the_kernels_bounds_is_no_disagreement() {
    // A tap refused 18,536 frames back (ENOBUFS) and they went again.
    let c = sent(39_155, 39_155, 18_536);
    assert!(!c.flagged, "{c:?}");
    assert!(c.what.contains("refused frames back"), "{}", c.what);
    // veth dropped silently: both sides counted them; nothing to say.
    let c = sent(57_691, 39_155, 18_536);
    assert!(!c.flagged && c.what == "gen: sent", "{c:?}");
}

#[test]
fn a_count_outside_the_bounds_stays_flagged() {
    // Fewer than the device sent, or more than it sent and dropped.
    assert!(sent(30_000, 39_155, 18_536).flagged);
    assert!(sent(60_000, 39_155, 0).flagged);
    assert!(sent(70_000, 39_155, 18_536).flagged);
    assert!(!sent(30_000, 39_155, 18_536).what.contains("refused"));
}

#[test]
fn frames_the_driver_refused_on_xdp_transmit_count_on_the_kernels_side() {
    // A virtio-net guest's live engine: 52,474 handed over, 50,725 in
    // tx_packets + tx_dropped, 1,749 refused by the driver's XDP transmit.
    let mut c = CrossCheck::new("r1: sent", 52_474, 50_725);
    assert!(c.flagged);
    add_driver_xdp_drops(&mut c, 1_749);
    assert!(!c.flagged, "{c:?}");
    assert_eq!(c.kernel, 52_474);
    assert!(
        c.what
            .contains("1749 frames the driver's XDP transmit refused"),
        "{}",
        c.what
    );
    // None refused: the check is as it was.
    let mut c = CrossCheck::new("r1: sent", 52_474, 50_725);
    add_driver_xdp_drops(&mut c, 0);
    assert!(c.flagged && c.what == "r1: sent");
}

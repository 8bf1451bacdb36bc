//! What became of a test's DSCP (`--dscp`) on the way: the terminal's note
//! when frames arrived under other values than the one they were sent
//! with (a DUT that remarks), and nothing when all arrived as sent.

use crate::proto::Dscp;
use crate::results::TestResult;

/// `dir: sent ef (46), arrived af11 (10): 100 %` per direction where what
/// arrived differs from what was sent (values by share, largest first),
/// or TCP's limit once; `None` when every frame arrived as sent, or the
/// test marked nothing.
pub fn note(t: &TestResult) -> Option<String> {
    let sent = t.params.dscp?;
    let mut parts = Vec::new();
    for d in &t.directions {
        if d.dscp_note.is_some() {
            return Some(format!(
                "marked {sent}; what arrived is not counted for TCP (a capture on the receiving \
                 link shows it)"
            ));
        }
        let total: u64 = d.dscp_received.values().sum();
        if total == 0 || d.dscp_received.keys().all(|&v| v == sent.value()) {
            continue;
        }
        let mut got: Vec<(u8, u64)> = d.dscp_received.iter().map(|(&v, &n)| (v, n)).collect();
        got.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let shares: Vec<String> = got
            .iter()
            .map(|&(v, n)| {
                let name = Dscp::new(v).map_or(v.to_string(), |x| x.to_string());
                format!("{name}: {}", percent(n, total))
            })
            .collect();
        parts.push(format!(
            "{}: sent {sent}, arrived {}",
            d.direction,
            shares.join(", ")
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// `n` of `total` in %, whole unless that would say 0 or 100 of a part.
fn percent(n: u64, total: u64) -> String {
    let p = n as f64 * 100.0 / total as f64;
    if n == total || p.round() >= 1.0 && p.round() <= 99.0 {
        format!("{:.0} %", p)
    } else {
        format!("{p:.2} %")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{DirectionResult, Protocol, TestParams};

    fn test(sent: Option<&str>, received: &[(u8, u64)]) -> TestResult {
        let params = TestParams {
            dscp: sent.map(|s| s.parse().unwrap()),
            ..TestParams::new(Protocol::Udp, false, crate::proto::Direction::Forward, 1.0)
        };
        let mut t = TestResult::new("udp 64b one", String::new(), params);
        t.directions.push(DirectionResult {
            direction: "gen_to_sink".into(),
            dscp_received: received.iter().copied().collect(),
            ..Default::default()
        });
        t
    }

    #[test]
    fn quiet_when_everything_arrived_as_sent() {
        assert_eq!(note(&test(Some("ef"), &[(46, 1000)])), None);
        assert_eq!(note(&test(None, &[(10, 1000)])), None, "nothing marked");
        assert_eq!(note(&test(Some("ef"), &[])), None, "nothing counted");
    }

    #[test]
    fn a_remark_is_said_with_names_values_and_shares() {
        assert_eq!(
            note(&test(Some("ef"), &[(10, 1000)])).as_deref(),
            Some("gen_to_sink: sent ef (46), arrived af11 (10): 100 %")
        );
        assert_eq!(
            note(&test(Some("ef"), &[(46, 100), (10, 900)])).as_deref(),
            Some("gen_to_sink: sent ef (46), arrived af11 (10): 90 %, ef (46): 10 %")
        );
        // An unnamed value is its number; a sliver is not rounded to 0.
        assert_eq!(
            note(&test(Some("cs1"), &[(8, 9999), (13, 1)])).as_deref(),
            Some("gen_to_sink: sent cs1 (8), arrived cs1 (8): 99.99 %, 13: 0.01 %")
        );
    }

    #[test]
    fn tcp_says_it_cannot_count() {
        let mut t = test(Some("af21"), &[]);
        t.directions[0].dscp_note = Some(crate::results::TCP_DSCP_NOTE.into());
        let n = note(&t).unwrap();
        assert!(
            n.starts_with("marked af21 (18); what arrived is not counted for TCP"),
            "{n}"
        );
    }
}

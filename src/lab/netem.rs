//! The DUT's delay, jitter and reordering (`--dut-delay`, `--dut-jitter`,
//! `--dut-reorder`): a tc netem qdisc on both of the DUT's egresses, so a
//! round trip through it takes twice the delay. The kernel needs
//! sch_netem: a guest's kernel (`--dut-vm`) has it where this host's may
//! not, and the agent that applies it says so ([`crate::netops`]).

use crate::proto::NetOp;
use std::time::Duration;

/// What netem does on each of the DUT's egresses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Netem {
    /// Every packet waits this long ...
    pub delay: Duration,
    /// ... give or take up to this (uniformly; packets then overtake
    /// each other when they are closer than the jitter).
    pub jitter: Duration,
    /// This % of packets leave at once instead, ahead of delayed ones.
    pub reorder_pct: Option<f64>,
}

/// Why the flags do not make a netem setting.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NetemError {
    #[error("'{0}' is not a delay: give a time such as 20ms, 500us or 0.1s (a bare number is ms)")]
    Time(String),
    #[error("--dut-delay {0:?}: give more than 0 and at most 10 s")]
    Delay(Duration),
    #[error("--dut-jitter {jitter:?} is more than --dut-delay {delay:?}: a packet cannot leave before it arrived; give a jitter of at most the delay")]
    Jitter { delay: Duration, jitter: Duration },
    #[error("--dut-reorder {0}: give a percentage between 0 and 100 (exclusive)")]
    Reorder(f64),
    #[error("{0} changes how the DUT delays packets, and no --dut-delay was given: add --dut-delay (e.g. 20ms)")]
    NoDelay(&'static str),
}

/// Parses a delay: `20ms`, `1.5ms`, `500us`, `0.1s`; a bare number is ms.
pub fn parse_time(s: &str) -> Result<Duration, NetemError> {
    let t = s.trim().to_ascii_lowercase();
    let (num, scale) = if let Some(v) = t.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = t.strip_suffix("us") {
        (v, 1e-6)
    } else if let Some(v) = t.strip_suffix('s') {
        (v, 1.0)
    } else {
        (t.as_str(), 1e-3)
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0 && *v * scale <= 3600.0)
        .map(|v| Duration::from_secs_f64(v * scale))
        .ok_or_else(|| NetemError::Time(s.to_string()))
}

impl Netem {
    /// The setting the three flags ask for; `None` when none is given.
    pub fn from_flags(
        delay: Option<Duration>,
        jitter: Option<Duration>,
        reorder_pct: Option<f64>,
    ) -> Result<Option<Netem>, NetemError> {
        let Some(delay) = delay else {
            return match (jitter, reorder_pct) {
                (Some(_), _) => Err(NetemError::NoDelay("--dut-jitter")),
                (_, Some(_)) => Err(NetemError::NoDelay("--dut-reorder")),
                _ => Ok(None),
            };
        };
        if delay.is_zero() || delay > Duration::from_secs(10) {
            return Err(NetemError::Delay(delay));
        }
        let jitter = jitter.unwrap_or_default();
        if jitter > delay {
            return Err(NetemError::Jitter { delay, jitter });
        }
        if let Some(p) = reorder_pct.filter(|p| !(*p > 0.0 && *p < 100.0)) {
            return Err(NetemError::Reorder(p));
        }
        Ok(Some(Netem {
            delay,
            jitter,
            reorder_pct,
        }))
    }

    /// Packets netem may hold: what 1 Mpps brings in the longest delay,
    /// at least its default 1000, at most a million.
    pub fn limit_packets(&self) -> u32 {
        let s = (self.delay + self.jitter).as_secs_f64();
        (s * 1e6).ceil().clamp(1000.0, 1e6) as u32
    }

    /// The steps that put it on the DUT's two egresses.
    pub fn ops(&self, devs: [&str; 2]) -> Vec<NetOp> {
        let us = |d: Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX);
        devs.iter()
            .map(|dev| NetOp::Netem {
                dev: dev.to_string(),
                delay_us: us(self.delay),
                jitter_us: us(self.jitter),
                reorder_pct: self.reorder_pct,
                limit_packets: self.limit_packets(),
            })
            .collect()
    }

    /// One line for the results' lab record and the report.
    pub fn describe(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut s = format!(
            "tc netem on both DUT egresses (towards the sink and towards the generator): delay \
             {:.1} ms",
            ms(self.delay)
        );
        if !self.jitter.is_zero() {
            s.push_str(&format!(
                " ± {:.1} ms (packets closer than that overtake each other)",
                ms(self.jitter)
            ));
        }
        if let Some(p) = self.reorder_pct {
            s.push_str(&format!(
                ", {p} % reordered (sent at once, ahead of delayed ones)"
            ));
        }
        s.push_str(&format!(
            ", at most {} packets held; a round trip through the DUT takes {:.1} ms more",
            self.limit_packets(),
            2.0 * ms(self.delay)
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Option<Duration> {
        Some(Duration::from_millis(v))
    }

    #[test]
    fn times_parse_with_their_units() {
        assert_eq!(parse_time("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_time("20"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_time("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_time("0.1s"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_time(" 1.5MS "), Ok(Duration::from_micros(1500)));
        for bad in ["", "fast", "-1ms", "nanms", "1h", "9999s"] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags_make_a_setting_or_say_what_is_missing() {
        assert_eq!(Netem::from_flags(None, None, None), Ok(None));
        let n = Netem::from_flags(ms(20), ms(2), Some(10.0))
            .unwrap()
            .unwrap();
        assert_eq!(n.limit_packets(), 22_000);
        let ops = n.ops(["dut0", "dut1"]);
        assert_eq!(ops.len(), 2);
        assert!(matches!(
            &ops[1],
            NetOp::Netem { dev, delay_us: 20_000, jitter_us: 2_000, reorder_pct: Some(p), limit_packets: 22_000 }
                if dev == "dut1" && *p == 10.0
        ));
        let d = n.describe();
        assert!(
            d.contains("delay 20.0 ms ± 2.0 ms") && d.contains("10 % reordered"),
            "{d}"
        );
        assert!(d.contains("40.0 ms more"), "{d}");
        let small = Netem::from_flags(Some(Duration::from_micros(100)), None, None);
        assert_eq!(small.unwrap().unwrap().limit_packets(), 1000);
        for (delay, jitter, reorder, want) in [
            (None, ms(2), None, "--dut-jitter changes"),
            (None, None, Some(5.0), "--dut-reorder changes"),
            (ms(0), None, None, "more than 0"),
            (ms(11_000), None, None, "at most 10 s"),
            (ms(5), ms(6), None, "at most the delay"),
            (ms(5), None, Some(100.0), "between 0 and 100"),
            (ms(5), None, Some(0.0), "between 0 and 100"),
        ] {
            let e = Netem::from_flags(delay, jitter, reorder)
                .expect_err(want)
                .to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }
}

//! Per-interval lines (`--interval SECS`), iperf3 `-i` style: one line per
//! period with the rates seen in it, printed whether or not the output is
//! a terminal, so a log or a pipe shows a run as it goes.

use crate::model::stderr::errln;
use crate::model::units;
use crate::runner::Progress;
use std::sync::Mutex;

/// Prints a line every `every_s` seconds of a test.
pub struct IntervalLines {
    every_s: f64,
    /// On stdout (the results table's stream) unless stdout carries JSON.
    to_stdout: bool,
    state: Mutex<Period>,
}

/// The updates seen since the last line.
#[derive(Default)]
struct Period {
    test: String,
    from_s: f64,
    to_s: f64,
    updates: u32,
    /// Updates that carried each side's figures (a side not heard from
    /// yet in a test reports zeros, which are not a rate).
    tx_n: u32,
    rx_n: u32,
    tx_pps: f64,
    rx_pps: f64,
    tx_bps: f64,
    rx_bps: f64,
    loss: f64,
}

impl Period {
    fn line(&self) -> Option<String> {
        if self.updates == 0 {
            return None;
        }
        let rate = |pps: f64, bps: f64, n: u32| {
            if n == 0 {
                return "-".to_string();
            }
            let n = f64::from(n);
            if pps > 0.0 {
                format!("{}pps {}bit/s", units::si(pps / n), units::si(bps / n))
            } else {
                format!("{}bit/s", units::si(bps / n))
            }
        };
        let mut l = format!(
            "[{:>6.1}-{:>6.1} s] {}  offered {}  received {}",
            self.from_s,
            self.to_s,
            self.test,
            rate(self.tx_pps, self.tx_bps, self.tx_n),
            rate(self.rx_pps, self.rx_bps, self.rx_n)
        );
        if self.tx_pps > 0.0 || self.rx_pps > 0.0 {
            let n = f64::from(self.rx_n.max(1));
            l.push_str(&format!("  loss {:.3} %", self.loss / n * 100.0));
        }
        Some(l)
    }
}

impl IntervalLines {
    pub fn new(every_s: f64, to_stdout: bool) -> Self {
        IntervalLines {
            every_s,
            to_stdout,
            state: Mutex::new(Period::default()),
        }
    }

    /// Takes one progress update; prints a line when a period is complete.
    /// The rates of a period are the mean of the updates within it (each
    /// update holds the rates of the agents' latest 1 s sample).
    pub fn update(&self, p: &Progress) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        if s.test != p.test {
            if let Some(l) = s.line() {
                self.emit(&l);
            }
            *s = Period {
                test: p.test.clone(),
                ..Default::default()
            };
        }
        s.to_s = p.elapsed_s;
        s.updates += 1;
        if p.tx_bps > 0.0 {
            s.tx_n += 1;
            s.tx_pps += p.tx_pps;
            s.tx_bps += p.tx_bps;
        }
        if p.rx_bps > 0.0 || p.loss_ratio > 0.0 {
            s.rx_n += 1;
            s.rx_pps += p.rx_pps;
            s.rx_bps += p.rx_bps;
            s.loss += p.loss_ratio;
        }
        if p.elapsed_s - s.from_s >= self.every_s - 1e-6 {
            if let Some(l) = s.line() {
                self.emit(&l);
            }
            *s = Period {
                test: p.test.clone(),
                from_s: p.elapsed_s,
                ..Default::default()
            };
        }
    }

    /// Prints what is left of the last period (the end of a test).
    pub fn flush(&self) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        if let Some(l) = s.line() {
            self.emit(&l);
        }
        *s = Period::default();
    }

    fn emit(&self, line: &str) {
        if self.to_stdout {
            crate::model::stdout::println(line);
        } else {
            errln!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_per_period_with_its_mean() {
        let iv = IntervalLines::new(2.0, false);
        let p = |t: f64, rx: f64| Progress {
            test: "udp".into(),
            elapsed_s: t,
            duration_s: 4.0,
            tx_pps: 1000.0,
            rx_pps: rx,
            tx_bps: 1e6,
            rx_bps: rx * 1e3,
            loss_ratio: 0.0,
        };
        iv.update(&p(1.0, 800.0));
        assert_eq!(iv.state.lock().unwrap().updates, 1);
        iv.update(&p(2.0, 1000.0));
        // The period ended: a new one starts at 2 s.
        let s = iv.state.lock().unwrap();
        assert_eq!((s.updates, s.from_s), (0, 2.0));
        drop(s);
        let mut period = Period {
            test: "udp".into(),
            from_s: 0.0,
            to_s: 2.0,
            ..Default::default()
        };
        for rx in [800.0, 1000.0] {
            period.updates += 1;
            period.tx_n += 1;
            period.rx_n += 1;
            period.tx_pps += 1000.0;
            period.rx_pps += rx;
            period.tx_bps += 1e6;
            period.rx_bps += rx * 1e3;
        }
        let l = period.line().unwrap();
        assert!(l.starts_with("[   0.0-   2.0 s] udp"), "{l}");
        assert!(l.contains("received 900.00 pps"), "{l}");
        assert!(l.contains("loss 0.000 %"), "{l}");
    }
}

//! Export of a ramp in the JSON that wejn/trex-loadtest-viz's `graph.rb`
//! plots (the format Pim's trex-loadtest.py writes):
//!
//! ```text
//! { "vars":  { "warmup_mult": …, "warmup_duration": …, "rampup_target": …,
//!              "rampup_duration": …, "hold_duration": …,
//!              "profile_file": …, "unidirectional": … },
//!   "stats": { "<sample>": { "0": { "tx_pps", "rx_pps", "tx_util", "rx_util" },
//!                            "1": { … } }, … } }
//! ```
//!
//! Ports are TRex's: direction 0 is sent from port 0 and received on port 1,
//! direction 1 the other way. graph.rb pairs port 0's `tx_pps` with port
//! 1's `rx_pps` (and back), so a port's `rx_*` is the *other* direction's
//! received traffic. Utilisation is % of line rate, L1.

use super::ramp::{RampSample, RampSpec};
use serde_json::{json, Map, Value};

/// A JSON number that stays a float when whole (`0.0`, not `0`): graph.rb
/// divides by `tx_pps`, and Ruby's integer 0 / 0 raises where 0.0 / 0.0
/// gives NaN. Non-finite values (which JSON cannot carry) become 0.0.
fn float(v: f64) -> Value {
    Value::from(if v.is_finite() { v } else { 0.0 })
}

/// Seconds as a JSON number: an integer when whole, as trex-loadtest writes them.
fn seconds(v: f64) -> Value {
    if v.fract() == 0.0 && v.is_finite() && v.abs() < 1e15 {
        Value::from(v as i64)
    } else {
        float(v)
    }
}

fn pct(pps: f64, line_rate_pps: f64) -> f64 {
    if line_rate_pps > 0.0 {
        pps / line_rate_pps * 100.0
    } else {
        0.0
    }
}

/// The trex-loadtest-viz JSON of one ramp.
///
/// `forward` is direction 0 (port 0 → port 1); `reverse` is direction 1,
/// absent for a unidirectional run. Then port 1 sends nothing and its
/// `tx_pps` is 0.0, as in trex-loadtest's own files: graph.rb versions that
/// draw the error graph relative to `tx_pps` get NaN for channel 1→0 and
/// need `--only-channels 0`, as seeds/001 runs them (checked by hand with
/// Ruby 3.1 against both versions of graph.rb we could read). Samples are
/// paired by index; a bidirectional export has as many samples as the
/// shorter direction. `line_rate_pps` is the rate that
/// fills the line at this profile's frame size (`units::line_rate_pps`).
///
/// `stats` keys are the sample index, zero-padded to one width: graph.rb
/// iterates them in file order, and `serde_json` (without its
/// `preserve_order` feature) writes object keys sorted as strings.
pub fn viz_export(
    spec: &RampSpec,
    forward: &[RampSample],
    reverse: Option<&[RampSample]>,
    profile: &str,
    line_rate_pps: f64,
) -> Value {
    let n = reverse.map_or(forward.len(), |r| r.len().min(forward.len()));
    let width = n.saturating_sub(1).to_string().len();
    let port = |tx: f64, rx: f64| {
        json!({
            "tx_pps": float(tx),
            "rx_pps": float(rx),
            "tx_util": float(pct(tx, line_rate_pps)),
            "rx_util": float(pct(rx, line_rate_pps)),
        })
    };
    let mut stats = Map::new();
    for i in 0..n {
        let d0 = &forward[i];
        let (tx1, rx_of_1) = match reverse {
            Some(r) => (r[i].offered_pps, r[i].received_pps),
            None => (0.0, 0.0),
        };
        stats.insert(
            format!("{i:0width$}"),
            json!({
                // Port 0 sends direction 0 and receives direction 1.
                "0": port(d0.offered_pps, rx_of_1),
                // Port 1 sends direction 1 and receives direction 0.
                "1": port(tx1, d0.received_pps),
            }),
        );
    }
    json!({
        "vars": {
            // TRex multiplier syntax, as trex-loadtest passes them to TRex.
            "warmup_mult": format!("{}pps", spec.warmup_pps),
            "warmup_duration": seconds(spec.warmup_s),
            "rampup_target": format!("{:.2}%", pct(spec.target_pps, line_rate_pps)),
            "rampup_duration": seconds(spec.ramp_s),
            "hold_duration": seconds(spec.hold_s),
            "profile_file": profile,
            "unidirectional": reverse.is_none(),
            // Not read by graph.rb; kept so the file stands on its own.
            "rampup_target_pps": float(spec.target_pps),
            "line_rate_pps": float(line_rate_pps),
            "generator": concat!("linerate ", env!("CARGO_PKG_VERSION")),
        },
        "stats": stats,
    })
}

#[cfg(test)]
mod tests {
    use super::super::ramp::{saturation, DEFAULT_SATURATION_LOSS};
    use super::super::sim::{SimConfig, SimDut};
    use super::*;

    const LINE: f64 = 1_488_095.2; // 10 GbE at 64 B is 14.88 Mpps; a 1 G line.

    fn spec() -> RampSpec {
        RampSpec {
            warmup_pps: 1000.0,
            warmup_s: 3.0,
            start_pps: 0.0,
            target_pps: LINE,
            ramp_s: 10.0,
            hold_s: 3.0,
        }
    }

    fn ramp(capacity: f64, seed: u64) -> Vec<RampSample> {
        SimDut::new(SimConfig {
            seed,
            capacity_pps: capacity,
            ..SimConfig::default()
        })
        .ramp_samples(&spec())
    }

    /// Checks `doc` has exactly what graph.rb (wejn/trex-loadtest-viz,
    /// latest version read) reads, where it reads it:
    fn check_graph_rb_fields(doc: &Value) {
        // "Load up the loadtests": `(data.keys & ["vars", "stats"]).size == 2`.
        let vars = doc["vars"].as_object().expect("vars");
        let stats = doc["stats"].as_object().expect("stats");
        // "Sanity checks": `t["vars"].fetch_values(*config_keys_to_verify)`
        // with config_keys_to_verify = warmup_mult warmup_duration
        // rampup_target rampup_duration hold_duration (KeyError if missing);
        // the values are printed in the "Config" table.
        for key in [
            "warmup_mult",
            "warmup_duration",
            "rampup_target",
            "rampup_duration",
            "hold_duration",
        ] {
            let v = vars.get(key).unwrap_or_else(|| panic!("vars.{key}"));
            assert!(v.is_string() || v.is_number(), "vars.{key} = {v}");
        }
        // "Compute per profile json": `c['vars']['profile_file']`, sorted
        // and passed to `File.basename(k, '.py')`: a string.
        assert!(vars["profile_file"].is_string());
        // Issue 3 asks for it too (newer graph.rb picks channels with it).
        assert!(vars["unidirectional"].is_boolean());
        // `t["stats"].keys.size` is the number of datapoints: not zero.
        assert!(!stats.is_empty());
        // Keys iterate in file order; sorted-as-strings must be numeric order.
        let keys: Vec<&String> = stats.keys().collect();
        let idx: Vec<usize> = keys.iter().map(|k| k.parse().unwrap()).collect();
        assert_eq!(
            idx,
            (0..keys.len()).collect::<Vec<_>>(),
            "stats keys in order"
        );
        for (k, v) in stats {
            for port in ["0", "1"] {
                let p = v[port]
                    .as_object()
                    .unwrap_or_else(|| panic!("stats.{k}.{port}"));
                // `channel_stats`: v[from]["tx_pps"], v[to]["rx_pps"],
                // v[from]["tx_util"]; `eval_max_performance`: also
                // v[to]["rx_util"]. Floats, so Ruby divides as floats.
                for field in ["tx_pps", "rx_pps", "tx_util", "rx_util"] {
                    let x = &p[field];
                    assert!(x.is_f64(), "stats.{k}.{port}.{field} = {x} is not a float");
                }
            }
        }
    }

    /// graph.rb's `eval_max_performance` for channel from → to: the rx
    /// rate where the final failing run starts, else the peak rx rate.
    fn graph_rb_max_ok_pps(doc: &Value, from: &str, to: &str, threshold: f64) -> f64 {
        let mut max_ok: Option<f64> = None;
        let mut max_pps: f64 = 0.0;
        for v in doc["stats"].as_object().unwrap().values() {
            let tx = v[from]["tx_pps"].as_f64().unwrap();
            let rx = v[to]["rx_pps"].as_f64().unwrap();
            if (tx - rx) / tx > threshold {
                max_ok.get_or_insert(rx);
            } else {
                max_ok = None;
            }
            max_pps = max_pps.max(rx);
        }
        max_ok.unwrap_or(max_pps)
    }

    #[test]
    fn bidirectional_export_has_what_graph_rb_reads() {
        let (fwd, rev) = (ramp(1_000_000.0, 1), ramp(700_000.0, 2));
        let doc = viz_export(&spec(), &fwd, Some(&rev), "bench-var2-64b", LINE);
        check_graph_rb_fields(&doc);
        assert_eq!(doc["vars"]["unidirectional"], false);
        assert_eq!(doc["vars"]["warmup_duration"], 3);
        assert_eq!(doc["vars"]["rampup_target"], "100.00%");
        assert_eq!(doc["vars"]["warmup_mult"], "1000pps");
        let stats = doc["stats"].as_object().unwrap();
        assert_eq!(stats.len(), 16);
        assert!(stats.contains_key("00") && stats.contains_key("15"));
        // Port 0 sends direction 0; port 1 receives it.
        let last = &stats["15"];
        assert_eq!(last["0"]["tx_pps"].as_f64(), Some(fwd[15].offered_pps));
        assert_eq!(last["1"]["rx_pps"].as_f64(), Some(fwd[15].received_pps));
        assert_eq!(last["1"]["tx_pps"].as_f64(), Some(rev[15].offered_pps));
        assert!((last["0"]["tx_util"].as_f64().unwrap() - 100.0).abs() < 1e-6);

        // graph.rb's verdict on the export agrees with ours, per direction.
        for (samples, from, to) in [(&fwd, "0", "1"), (&rev, "1", "0")] {
            let ours = saturation(samples, DEFAULT_SATURATION_LOSS, LINE).unwrap();
            let theirs = graph_rb_max_ok_pps(&doc, from, to, DEFAULT_SATURATION_LOSS);
            assert_eq!(ours.received_pps, theirs, "{from}→{to}");
        }
    }

    #[test]
    fn unidirectional_export_keeps_port_1_silent() {
        let fwd = ramp(2_000_000.0, 3);
        let doc = viz_export(&spec(), &fwd, None, "bench", LINE);
        check_graph_rb_fields(&doc);
        assert_eq!(doc["vars"]["unidirectional"], true);
        let first = &doc["stats"]["00"];
        assert_eq!(first["1"]["tx_pps"].as_f64(), Some(0.0));
        assert_eq!(first["0"]["rx_pps"].as_f64(), Some(0.0));
        // Serialised as 0.0, a float for Ruby.
        let text = serde_json::to_string(&doc).unwrap();
        assert!(text.contains(r#""tx_pps":0.0"#), "{text}");
        // Never saturated: graph.rb reports the peak.
        assert_eq!(saturation(&fwd, DEFAULT_SATURATION_LOSS, LINE), None);
        let peak = fwd.iter().map(|s| s.received_pps).fold(0.0, f64::max);
        assert_eq!(
            graph_rb_max_ok_pps(&doc, "0", "1", DEFAULT_SATURATION_LOSS),
            peak
        );
    }

    #[test]
    fn many_samples_keep_their_order() {
        let long = RampSpec {
            ramp_s: 200.0,
            ..spec()
        };
        let fwd = SimDut::new(SimConfig::default()).ramp_samples(&long);
        let doc = viz_export(&long, &fwd, None, "imix", LINE);
        check_graph_rb_fields(&doc);
        assert!(doc["stats"].as_object().unwrap().contains_key("205"));
        assert!(doc["stats"].as_object().unwrap().contains_key("000"));
    }
}

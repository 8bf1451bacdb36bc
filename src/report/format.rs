//! Numbers as a network engineer reads them (`59,009 pps`, `34.8 Gbit/s`,
//! `0.012 %`) and HTML escaping. No I/O.

/// Thousands separators: `1234567` → `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Packets per second, whole packets: `59,009 pps`.
pub fn pps(v: f64) -> String {
    if !v.is_finite() || v < 0.0 {
        return "-".into();
    }
    format!("{} pps", count(v.round() as u64))
}

/// A value with an SI prefix and three significant digits: `34.8 G`.
pub fn si3(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    let (d, p) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(d, _)| a >= *d)
        .unwrap_or((1.0, ""));
    let x = v / d;
    let digits = if x.abs() >= 100.0 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{x:.digits$} {p}")
}

/// Bit rate: `34.8 Gbit/s`, `171 Mbit/s`.
pub fn bps(v: f64) -> String {
    if !v.is_finite() || v < 0.0 {
        return "-".into();
    }
    format!("{}bit/s", si3(v))
}

/// A ratio (0..1) as a percentage with `decimals` places: `1.8 %`.
pub fn pct(ratio: f64, decimals: usize) -> String {
    if !ratio.is_finite() {
        return "-".into();
    }
    format!("{:.decimals$} %", ratio * 100.0)
}

/// Bytes with binary prefixes: `4.5 MiB`.
pub fn bytes(n: u64) -> String {
    let v = n as f64;
    let (d, p) = [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ]
    .into_iter()
    .find(|(d, _)| n >= *d)
    .unwrap_or((1, "B"));
    if d == 1 {
        format!("{n} B")
    } else {
        format!("{:.1} {p}", v / d as f64)
    }
}

/// Seconds: `3.0 s`, `59 s`, `2 min 5 s`.
pub fn seconds(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "-".into();
    }
    if s < 10.0 {
        format!("{s:.1} s")
    } else if s < 120.0 {
        format!("{s:.0} s")
    } else {
        let whole = s.round() as u64;
        format!("{} min {} s", whole / 60, whole % 60)
    }
}

/// Difference of `v` against `base` in %, signed: `+12.3 %`.
pub fn delta_pct(v: f64, base: f64) -> Option<String> {
    if base == 0.0 || !v.is_finite() || !base.is_finite() {
        return None;
    }
    Some(format!("{:+.1} %", (v - base) / base.abs() * 100.0))
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON for a `<script type="application/json">` block: `<` is escaped so
/// no string in the data can close the script element.
pub fn script_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v)
        .unwrap_or_else(|_| "null".into())
        .replace('<', "\\u003c")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(14_880_952), "14,880,952");
        assert_eq!(pps(59_009.4), "59,009 pps");
        assert_eq!(bps(34.799e9), "34.8 Gbit/s");
        assert_eq!(bps(171.4e6), "171 Mbit/s");
        assert_eq!(bps(1.265e9), "1.26 Gbit/s");
        assert_eq!(bps(512.0), "512 bit/s");
        assert_eq!(pct(0.0123, 1), "1.2 %");
        assert_eq!(pct(0.0, 3), "0.000 %");
        assert_eq!(bytes(4_685_824), "4.5 MiB");
        assert_eq!(bytes(100), "100 B");
        assert_eq!(seconds(3.04), "3.0 s");
        assert_eq!(seconds(125.0), "2 min 5 s");
        assert_eq!(delta_pct(110.0, 100.0).as_deref(), Some("+10.0 %"));
        assert_eq!(delta_pct(1.0, 0.0), None);
        assert_eq!(pps(f64::NAN), "-");
    }

    #[test]
    fn escaping() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let j = script_json(&serde_json::json!({"s": "</script><!--"}));
        assert!(!j.contains('<'), "{j}");
        let back: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(back["s"], "</script><!--");
    }
}

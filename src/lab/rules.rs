//! nftables rulesets of the DUT modes and impairments, and the DSCP
//! remark (`--dut-remark`) with its parser.

use crate::proto::Dscp;

/// Masquerade everything leaving towards the sink (IPv4 and IPv6).
pub fn nat(out_dev: &str) -> String {
    format!(
        "table ip linerate_nat {{\n  chain post {{\n    type nat hook postrouting priority srcnat; policy accept;\n    oifname \"{out_dev}\" masquerade\n  }}\n}}\n\
         table ip6 linerate_nat6 {{\n  chain post {{\n    type nat hook postrouting priority srcnat; policy accept;\n    oifname \"{out_dev}\" masquerade\n  }}\n}}\n"
    )
}

/// A forward chain with `rules` rules where only the last matches test
/// traffic: every packet walks the whole list, as in a real rule base.
/// The non-matching rules name addresses of 198.18.200.0/24, which the lab
/// never uses. Policy is drop, so a broken match would show as loss.
pub fn firewall(rules: u32) -> String {
    let rules = rules.max(1);
    let mut s = String::from(
        "table inet linerate_fw {\n  chain lr_forward {\n    type filter hook forward priority filter; policy drop;\n",
    );
    for i in 0..rules - 1 {
        s.push_str(&format!(
            "    ip saddr 198.18.200.{} udp dport {} drop\n",
            i % 250 + 1,
            1000 + i % 60000
        ));
    }
    s.push_str("    ip saddr 198.18.0.0/15 ip daddr 198.18.0.0/15 accept\n");
    s.push_str("    ip6 saddr 2001:2::/48 ip6 daddr 2001:2::/48 accept\n");
    s.push_str("  }\n}\n");
    s
}

/// Drops `pct` % of forwarded packets at random, in steps of 0.01 %. The
/// bridge family's forward hook sees bridged frames; inet's sees routed ones.
pub fn random_loss(pct: f64, bridge: bool) -> String {
    let per_10k = (pct * 100.0).round().clamp(1.0, 9999.0) as u32;
    let family = if bridge { "bridge" } else { "inet" };
    format!(
        "table {family} linerate_loss {{\n  chain lr_forward {{\n    type filter hook forward priority -10; policy accept;\n    numgen random mod 10000 < {per_10k} counter drop\n  }}\n}}\n"
    )
}

/// Polices forwarded traffic to `pps` packets per second (a token bucket of
/// `burst` packets): a DUT with a known capacity, to check searches and ramps
/// against.
pub fn police(pps: u64, burst: u64, bridge: bool) -> String {
    let family = if bridge { "bridge" } else { "inet" };
    format!(
        "table {family} linerate_police {{\n  chain lr_forward {{\n    type filter hook forward priority -5; policy accept;\n    limit rate over {pps}/second burst {burst} packets counter drop\n  }}\n}}\n"
    )
}

/// A DUT that rewrites the DSCP of what it forwards (`--dut-remark
/// FROM=TO`): packets marked `from` (every packet when `None`, written
/// `any`) leave marked `to`, IPv4 and IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remark {
    pub from: Option<Dscp>,
    pub to: Dscp,
}

/// A `--dut-remark` that is not `FROM=TO` of two DSCPs; the message says
/// how to write one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RemarkError(String);

impl std::str::FromStr for Remark {
    type Err = RemarkError;
    fn from_str(s: &str) -> Result<Remark, RemarkError> {
        let err = |m: String| RemarkError(m);
        let (from, to) = s.split_once('=').ok_or_else(|| {
            err(format!(
                "'{s}': write FROM=TO, e.g. ef=af11 (packets marked ef leave marked af11) or \
                 any=cs1 (every packet)"
            ))
        })?;
        let from = match from.trim() {
            f if f.eq_ignore_ascii_case("any") => None,
            f => Some(f.parse::<Dscp>().map_err(|e| err(format!("FROM: {e}")))?),
        };
        let to = to.parse::<Dscp>().map_err(|e| err(format!("TO: {e}")))?;
        Ok(Remark { from, to })
    }
}

impl std::fmt::Display for Remark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.from {
            Some(d) => write!(f, "DSCP {d} remarked to {}", self.to),
            None => write!(f, "every DSCP remarked to {}", self.to),
        }
    }
}

/// Rewrites the DSCP of forwarded packets as `r` says (IPv4 and IPv6,
/// the ECN bits kept; nftables fixes the IPv4 header checksum). The
/// bridge family's forward hook sees bridged frames; inet's routed ones.
pub fn remark(r: Remark, bridge: bool) -> String {
    let family = if bridge { "bridge" } else { "inet" };
    let rule = |ip: &str| match r.from {
        Some(f) => format!(
            "    {ip} dscp {} {ip} dscp set {}\n",
            f.value(),
            r.to.value()
        ),
        None => format!("    {ip} dscp set {}\n", r.to.value()),
    };
    format!(
        "table {family} linerate_remark {{\n  chain lr_forward {{\n    type filter hook forward priority 5; policy accept;\n{}{}  }}\n}}\n",
        rule("ip"),
        rule("ip6")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remarks_parse_and_become_rules() {
        let r: Remark = "ef=af11".parse().unwrap();
        assert_eq!((r.from.map(Dscp::value), r.to.value()), (Some(46), 10));
        let nft = remark(r, false);
        assert!(nft.contains("table inet linerate_remark"), "{nft}");
        assert!(nft.contains("    ip dscp 46 ip dscp set 10\n"), "{nft}");
        assert!(nft.contains("    ip6 dscp 46 ip6 dscp set 10\n"), "{nft}");
        assert_eq!(r.to_string(), "DSCP ef (46) remarked to af11 (10)");
        let any: Remark = "ANY=cs1".parse().unwrap();
        assert_eq!(any.from, None);
        let nft = remark(any, true);
        assert!(nft.contains("table bridge"), "{nft}");
        assert!(
            nft.contains("    ip dscp set 8\n    ip6 dscp set 8\n"),
            "{nft}"
        );
        assert_eq!("13=63".parse::<Remark>().unwrap().to.value(), 63);
    }

    #[test]
    fn bad_remarks_say_how_to_write_one() {
        let e = "ef".parse::<Remark>().unwrap_err().to_string();
        assert!(e.contains("write FROM=TO, e.g. ef=af11"), "{e}");
        let e = "ef=af14".parse::<Remark>().unwrap_err().to_string();
        assert!(e.starts_with("TO: 'af14' is not a DSCP"), "{e}");
        let e = "64=ef".parse::<Remark>().unwrap_err().to_string();
        assert!(e.starts_with("FROM: '64' is not a DSCP"), "{e}");
    }

    #[test]
    fn firewall_has_n_rules_last_matching() {
        let r = super::firewall(100);
        assert_eq!(r.matches(" drop\n").count(), 99);
        let accept = r
            .find("198.18.0.0/15 ip daddr 198.18.0.0/15 accept")
            .unwrap();
        assert!(accept > r.rfind(" drop\n").unwrap());
        assert!(super::nat("dut1").contains("oifname \"dut1\" masquerade"));
        assert!(super::random_loss(5.0, false).contains("table inet"));
        assert!(super::random_loss(5.0, true).contains("mod 10000 < 500 counter drop"));
    }
}

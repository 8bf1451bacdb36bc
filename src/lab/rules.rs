//! nftables rulesets of the DUT modes.

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

#[cfg(test)]
mod tests {
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

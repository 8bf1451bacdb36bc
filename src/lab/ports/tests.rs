//! Tests of the lab with physical ports.

use super::*;

fn flags<'a>(g: &'a [IpAddr], s: &'a [IpAddr]) -> PortFlags<'a> {
    PortFlags {
        gen_port: Some("eth1"),
        sink_port: Some("eth2"),
        dut_gen_addr: g,
        dut_sink_addr: s,
        ..Default::default()
    }
}

#[test]
fn defaults_are_the_embedded_labs_addressing() {
    let p = PortsSpec::from_flags(&flags(&[], &[])).unwrap().unwrap();
    let d = p.dut.unwrap();
    assert_eq!(d.gen_v4, Ipv4Addr::new(198, 18, 0, 254));
    assert_eq!(d.sink_v6, "2001:2:0:20::fe".parse::<Ipv6Addr>().unwrap());
    assert_eq!(port_v4(d.gen_v4), Ipv4Addr::new(198, 18, 0, 1));
    assert_eq!(
        port_v6(d.sink_v6),
        "2001:2:0:20::1".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(
        port_v4(Ipv4Addr::new(198, 19, 7, 1)),
        Ipv4Addr::new(198, 19, 7, 2)
    );
}

#[test]
fn dut_addresses_stay_on_their_side() {
    let ok = [
        "198.18.5.1".parse().unwrap(),
        "2001:2:0:12::1".parse().unwrap(),
    ];
    let p = PortsSpec::from_flags(&flags(&ok, &[])).unwrap().unwrap();
    assert_eq!(p.dut.unwrap().gen_v4, Ipv4Addr::new(198, 18, 5, 1));
    for bad in [
        "198.19.0.254",
        "198.18.1.254",
        "10.0.0.1",
        "2001:2:0:11::1",
        "2001:2:0:20::1",
    ] {
        let a = [bad.parse().unwrap()];
        let e = PortsSpec::from_flags(&flags(&a, &[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--dut-gen-addr"), "{bad}: {e}");
    }
}

#[test]
fn port_flags_are_checked() {
    assert_eq!(PortsSpec::from_flags(&PortFlags::default()).unwrap(), None);
    let one = PortFlags {
        gen_port: Some("eth1"),
        ..Default::default()
    };
    assert!(PortsSpec::from_flags(&one)
        .unwrap_err()
        .to_string()
        .contains("--sink-port"));
    let same = PortFlags {
        sink_port: Some("eth1"),
        ..one.clone()
    };
    assert!(PortsSpec::from_flags(&same)
        .unwrap_err()
        .to_string()
        .contains("both eth1"));
    let mac = PortFlags {
        dut_gen_mac: Some("02:00:5e:00:00"),
        ..flags(&[], &[])
    };
    assert!(PortsSpec::from_flags(&mac)
        .unwrap_err()
        .to_string()
        .contains("--dut-gen-mac"));
    let b2b = PortFlags {
        back_to_back: true,
        ..flags(&[], &[])
    };
    assert_eq!(PortsSpec::from_flags(&b2b).unwrap().unwrap().dut, None);
    assert_eq!(
        parse_mac("x", "02-00-5e-00-00-01").unwrap(),
        [2, 0, 0x5e, 0, 0, 1]
    );
}

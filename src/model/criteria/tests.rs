use super::*;

fn ok(s: &str) -> Criterion {
    parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn numbers_past_f64_are_refused() {
    // 400 digits parse as infinity; 309 nines times T overflow.
    let huge = format!("rx_pps>=1{}", "0".repeat(400));
    let e = parse(&huge).unwrap_err();
    assert!(e.message.contains("too large a number"), "{e}");
    assert_eq!((e.column, e.len), (8, 401));
    let e = parse(&format!("l1_bps<={}Tbit/s", "9".repeat(305))).unwrap_err();
    assert!(e.message.contains("too large a number for l1_bps"), "{e}");
    assert_eq!(ok(&format!("tx_pps>=1{}", "0".repeat(300))).value, 1e300);
}

fn err(s: &str) -> ParseError {
    parse(s).expect_err(s)
}

#[test]
fn good_criteria_in_base_units() {
    let c = ok("loss<=0.001%");
    assert_eq!(
        (c.figure.name, c.op, c.stat),
        ("loss", Op::Le, Stat::Median)
    );
    assert!((c.value - 0.00001).abs() < 1e-15);
    assert_eq!(ok("rx_pps>=1.2Mpps").value, 1.2e6);
    assert_eq!(ok("rx_pps >= 1.2 mpps").value, 1.2e6);
    assert_eq!(ok("p99<=2ms").value, 0.002);
    assert_eq!(ok("p99<=250us").value, 250e-6);
    assert_eq!(ok("ndr>=2Mpps").value, 2e6);
    assert_eq!(ok("ndr>=100kpps").value, 1e5);
    assert_eq!(ok("goodput>=9Gbit/s").value, 9e9);
    assert_eq!(ok("l2>=9.5gbps").figure.name, "l2_bps");
    assert_eq!(ok("retransmits<10").value, 10.0);
    assert_eq!(ok("retransmits<1k").value, 1000.0);
    assert_eq!(ok("line_pct>=90%").value, 90.0);
    assert_eq!(ok("rps>=2k/s").value, 2000.0);
    assert_eq!(ok("cpu<=80%").op, Op::Le);
    let c = ok("p99<=2ms@max");
    assert_eq!((c.stat, c.value), (Stat::Max, 0.002));
    assert_eq!(ok(" ndr >= 1 Mpps @ min ").stat, Stat::Min);
    assert_eq!(ok("ndr == 5").op, Op::Eq);
    assert_eq!(ok("ndr>=2Mpps").text, "ndr>=2Mpps");
}

#[test]
fn errors_point_at_the_fault() {
    let e = err("rx_pp>=1Mpps");
    assert_eq!((e.column, e.len), (0, 5));
    assert!(e.message.contains("unknown figure 'rx_pp'"), "{e}");
    assert!(
        e.message.contains("rx_pps, tx_pps"),
        "lists the figures: {e}"
    );
    let e = err("rx_pps>=1.2Mqps");
    assert_eq!((e.column, e.len), (11, 4), "{e}");
    assert!(e.message.contains("pps, kpps, Mpps"), "{e}");
    let e = err("loss<=0.001");
    assert_eq!(e.column, 11, "{e}");
    assert!(e.message.contains("with %"), "{e}");
    let e = err("p99<=2");
    assert!(e.message.contains("2ms"), "{e}");
    let e = err("p99=<2ms");
    assert_eq!((e.column, e.len), (3, 2), "{e}");
    let e = err("p99 2ms");
    assert_eq!(e.column, 4, "{e}");
    assert!(e.message.contains("comparison"), "{e}");
    let e = err("p99<=ms");
    assert_eq!(e.column, 5, "{e}");
    assert!(e.message.contains("number"), "{e}");
    let e = err("p99<=2ms@avg");
    assert_eq!((e.column, e.len), (9, 3), "{e}");
    let e = err("p99<=2ms junk");
    assert_eq!(e.column, 9, "{e}");
    let e = err("goodput>=1GB/s");
    assert!(e.message.contains("bytes"), "{e}");
    let e = err("");
    assert_eq!(e.column, 0);
    // The caret line sits under the fault.
    let text = err("rx_pps>=1.2Mqps").to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1], "  rx_pps>=1.2Mqps");
    assert_eq!(lines[2], "             ^^^^");
}

#[test]
fn values_are_shown_with_units() {
    assert_eq!(show(Kind::Pps, 1_234_567.0), "1.235 Mpps");
    assert_eq!(show(Kind::Ratio, 0.00001), "0.001 %");
    assert_eq!(show(Kind::Seconds, 0.002), "2 ms");
    assert_eq!(show(Kind::Bps, 9.41e9), "9.41 Gbit/s");
    assert_eq!(show(Kind::Count, 12.0), "12");
}

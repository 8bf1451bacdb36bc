use super::*;
use crate::model::criteria::parse;

fn subject(name: &str, reps: &[f64]) -> Subject {
    Subject {
        name: name.into(),
        reps: reps
            .iter()
            .map(|&v| BTreeMap::from([("ndr", v), ("loss", 0.0)]))
            .collect(),
        noise: BTreeMap::new(),
        at_least: BTreeSet::new(),
    }
}

#[test]
fn criteria_pass_fail_and_not_measured() {
    let s = [subject("search 64B", &[118_000.0])];
    let c = [
        parse("ndr>=100kpps").unwrap(),
        parse("ndr>=150kpps").unwrap(),
        parse("p99<=2ms").unwrap(),
    ];
    let r = evaluate(&c, &s);
    assert_eq!(r.len(), 3);
    assert!(r[0].passed, "{r:?}");
    assert!(!r[1].passed);
    assert_eq!(r[1].detail, "118 kpps >= 150 kpps");
    assert!(!r[2].passed && r[2].measured.is_none());
    assert!(r[2].detail.starts_with("not measured"), "{}", r[2].detail);
    assert!(r[2].detail.contains("search 64B"), "{}", r[2].detail);
}

#[test]
fn repetitions_median_min_max() {
    let s = subject("x", &[3.0, 1.0, 2.0, 10.0]);
    assert_eq!(s.stat("ndr", Stat::Median), Some(2.5));
    assert_eq!(s.stat("ndr", Stat::Min), Some(1.0));
    assert_eq!(s.stat("ndr", Stat::Max), Some(10.0));
    let r = evaluate(&[parse("ndr>=5@max").unwrap()], std::slice::from_ref(&s));
    assert!(
        r[0].passed && r[0].detail.contains("max of 4 runs"),
        "{r:?}"
    );
    let r = evaluate(&[parse("ndr>=5").unwrap()], &[s]);
    assert!(!r[0].passed);
}

#[test]
fn worse_direction_counts() {
    let mut m = BTreeMap::new();
    put(&mut m, "loss", 0.01);
    put(&mut m, "loss", 0.02);
    put(&mut m, "rx_pps", 5.0);
    put(&mut m, "rx_pps", 3.0);
    assert_eq!((m["loss"], m["rx_pps"]), (0.02, 3.0));
}

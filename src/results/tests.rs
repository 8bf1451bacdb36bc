use super::*;

#[test]
fn cross_check_flags_over_one_percent() {
    assert!(!CrossCheck::new("x", 1000, 1010).flagged);
    assert!(CrossCheck::new("x", 1000, 1011).flagged);
    assert!(CrossCheck::new("x", 1000, 980).flagged);
    assert!(!CrossCheck::new("x", 0, 0).flagged);
    assert!(!CrossCheck::kernel_at_least("x", 1000, 1200).flagged);
    assert!(!CrossCheck::kernel_at_least("x", 1000, 990).flagged);
    assert!(CrossCheck::kernel_at_least("x", 1000, 989).flagged);
}

#[test]
fn committed_schema_is_current() {
    let committed = include_str!("../../schema/results.schema.json");
    let committed: serde_json::Value = serde_json::from_str(committed).unwrap();
    // Not assert_eq: the diff of two schemas is unreadable; regenerate instead.
    assert!(
        committed == json_schema(),
        "schema/results.schema.json is stale: run `linerate schema > schema/results.schema.json`"
    );
}

#[test]
fn issue_23_an_interrupted_run_says_what_it_stopped() {
    let mut r: RunResults =
        serde_json::from_str(include_str!("../../tests/fixtures/report/lab-both.json"))
            .expect("fixture");
    assert!(!r.labs.is_empty());
    let lab = r.interrupted_note(true);
    assert!(lab.contains("the lab was torn down"), "{lab}");
    assert!(lab.contains("results.json"), "{lab}");
    r.labs.clear();
    let adhoc = r.interrupted_note(false);
    assert!(!adhoc.contains("lab"), "{adhoc}");
    assert!(adhoc.contains("the agents' jobs were stopped"), "{adhoc}");
    assert!(adhoc.contains("the table above"), "{adhoc}");
}

use super::*;
use crate::report::testdata;
use std::path::PathBuf;

fn one(r: RunResults) -> String {
    single(&Run {
        label: r.name.clone(),
        dir: PathBuf::from("/x"),
        results: r,
    })
}

#[test]
fn page_is_self_contained() {
    let page = one(testdata::lab());
    assert!(!page.contains("http://") && !page.contains("https://"));
    assert!(!page.contains("src=\"") && !page.contains("href=\"http"));
    assert!(page.contains("Content-Security-Policy"));
    assert!(
        page.contains("Permission is hereby granted"),
        "licence travels with uPlot"
    );
    assert!(page.len() < 300_000, "{} bytes", page.len());
}

#[test]
fn a_plan_s_vm_host_is_named_virtual_in_the_report() {
    let page = one(testdata::with_vm_host());
    assert!(page.contains("<h3>VM hosts</h3>"), "no VM hosts section");
    assert!(
        page.contains(
            "<tr><th>r1</th><td>virtual (TCG-emulated) — a VM with kernel 6.1.0-41-amd64"
        ),
        "VM host row missing"
    );
    assert!(!one(testdata::lab()).contains("<h3>VM hosts</h3>"));
}

#[test]
fn tables_carry_values_and_flags() {
    let page = one(testdata::paced());
    assert!(
        page.contains("class=\"flagged\""),
        "flagged cross-checks are marked"
    );
    assert!(page.contains("counters disagree"));
    let page = one(testdata::lab());
    assert!(!page.contains("class=\"flagged\""));
    let d = &testdata::lab().tests[1].directions[0];
    assert!(page.contains(&format!("data-key=\"rx_pps\" data-value=\"{}\"", d.rx_pps)));
}

#[test]
fn text_cannot_break_out_of_the_page() {
    let mut r = testdata::lab();
    r.name = "</script><script>alert(1)</script>".into();
    r.tests[0].name = "<b>x</b>".into();
    let page = one(r);
    assert!(!page.contains("<script>alert"));
    assert!(!page.contains("<b>x</b>"));
}

#[test]
fn comparison_page_lists_every_run() {
    let page = comparison(&testdata::three_runs());
    for l in ["route", "nat", "fw"] {
        assert!(page.contains(&format!(
            "Run {}: {l}",
            ["route", "nat", "fw"].iter().position(|x| *x == l).unwrap() + 1
        )));
    }
    assert!(page.contains("id=\"differences\""));
}

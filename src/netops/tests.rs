//! Tests of the network configuration steps.

use super::*;

#[test]
fn names_and_macs() {
    assert!(check_ifname("gen0").is_ok());
    assert!(check_ifname("br-dut.10").is_ok());
    assert!(check_ifname("").is_err());
    assert!(check_ifname("a23456789012345x").is_err());
    assert!(check_ifname("x; rm -rf /").is_err());
    assert_eq!(
        mac_string(&[2, 0x4c, 0x52, 0, 1, 0xff]),
        "02:4c:52:00:01:ff"
    );
}

#[test]
fn sysctl_keys_are_confined() {
    let bad = NetOp::Sysctl {
        key: "kernel.core_pattern".into(),
        value: "x".into(),
    };
    assert!(apply(&bad).unwrap_err().to_string().contains("only net.*"));
    let sneaky = NetOp::Sysctl {
        key: "net/../../kernel".into(),
        value: "x".into(),
    };
    assert!(apply(&sneaky).is_err());
}

#[test]
fn veth_ends_both_get_the_queues() {
    let a = veth_args(
        "gen0",
        [2, 0, 0, 0, 0, 1],
        10,
        "dut0",
        [2, 0, 0, 0, 0, 2],
        20,
        4,
    )
    .unwrap()
    .join(" ");
    assert_eq!(
        a,
        "link add gen0 address 02:00:00:00:00:01 netns 10 numtxqueues 4 numrxqueues 4 \
             type veth peer name dut0 address 02:00:00:00:00:02 netns 20 numtxqueues 4 \
             numrxqueues 4"
    );
    assert!(veth_args("a", [0; 6], 1, "b", [0; 6], 2, 0).is_err());
    assert!(veth_args("a;x", [0; 6], 1, "b", [0; 6], 2, 1).is_err());
}

#[test]
fn cpu_lists_read_back() {
    assert_eq!(parse_cpu_list("1\n"), Some(vec![1]));
    assert_eq!(parse_cpu_list("0-2,5"), Some(vec![0, 1, 2, 5]));
    assert_eq!(parse_cpu_list(""), Some(vec![]));
    assert_eq!(parse_cpu_list("3-1"), None);
    assert_eq!(parse_cpu_list("x"), None);
}

#[test]
fn cpu_masks_in_sysfs_form() {
    assert_eq!(cpu_mask(&[1]), "00000002");
    assert_eq!(cpu_mask(&[0, 2, 3]), "0000000d");
    assert_eq!(cpu_mask(&[2, 34]), "00000004,00000004");
    assert_eq!(cpu_mask(&[]), "00000000");
}

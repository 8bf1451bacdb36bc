#![no_main]
//! Fuzz target `iperf3`: see `linerate_fuzz::checks::iperf3` for what it asserts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_fuzz::checks::iperf3(data));

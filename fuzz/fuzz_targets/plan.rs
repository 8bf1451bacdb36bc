#![no_main]
//! Fuzz target `plan`: see `linerate_fuzz::checks::plan` for what it asserts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_fuzz::checks::plan(data));

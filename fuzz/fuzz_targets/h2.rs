#![no_main]
//! Fuzz target `h2`: see `linerate_fuzz::checks::h2` for what it asserts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_fuzz::checks::h2(data));

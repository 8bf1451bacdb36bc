#![no_main]
//! Fuzz target `frame`: see `linerate_fuzz::checks::frame` for what it asserts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_fuzz::checks::frame(data));

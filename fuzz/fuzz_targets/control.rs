#![no_main]
//! Fuzz target `control`: see `linerate_fuzz::checks::control` for what it asserts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_fuzz::checks::control(data));

#![no_main]
//! Fuzz target `probe`: see `linerate_fuzz::checks::probe` for what it asserts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_fuzz::checks::probe(data));

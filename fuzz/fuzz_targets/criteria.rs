#![no_main]
//! Fuzz target `criteria`: see `linerate_fuzz::checks::criteria` for what it asserts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_fuzz::checks::criteria(data));

#![no_main]
//! Fuzz target `units`: see `linerate_fuzz::checks::units` for what it asserts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_fuzz::checks::units(data));

#![no_main]
//! Fuzz target `http_head`: see `linerate_fuzz::checks::http_head` for what it asserts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_fuzz::checks::http_head(data));

#![no_main]
//! Fuzz target `chunked`: see `linerate_fuzz::checks::chunked` for what it asserts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_fuzz::checks::chunked(data));

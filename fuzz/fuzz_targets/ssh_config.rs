#![no_main]
//! Fuzz target `ssh_config`: see `linerate_fuzz::checks::ssh_config` for what it asserts.
libfuzzer_sys::fuzz_target!(|data: &[u8]| linerate_fuzz::checks::ssh_config(data));

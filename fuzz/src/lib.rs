//! linerate's fuzz targets share their checks with the stable replay test
//! (`tests/fuzz_replay.rs`), which includes `checks.rs` by path.
pub mod checks;

//! What the server sends: a generated object (`--size`, streamed from one
//! period of its pattern in memory), or the
//! files of a root warmed into (or evicted from) the page cache.

use super::HttpError;
use crate::proto::http::CacheState;
use crate::sys;
use crate::sys::tls as ffi;
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

/// Warming reads at most this much of a root.
const WARM_LIMIT: u64 = 64 << 30;

/// The largest `--size`: byte offsets are signed 64-bit in sendfile(2).
pub const MAX_SIZE: u64 = i64::MAX as u64;
/// The generated object repeats every [`PERIOD`] bytes: byte `i` of it is
/// `i % 251`. The memfd holds one period (a multiple of 251, about 4 MiB),
/// and every `--size`, however large, is sent from it: memory stays
/// bounded, and sendfile still moves large chunks.
pub const PERIOD: u64 = 251 * 16 * 1024;

/// The generated object's pattern: one [`PERIOD`] in a memfd (sendfile-able),
/// for an object of `n` bytes.
pub fn generated(n: u64) -> Result<File, HttpError> {
    if n > MAX_SIZE {
        return Err(HttpError::Config(format!(
            "--size {n}: over the largest object linerate serves ({MAX_SIZE} bytes, \
             the largest file offset); give a smaller size"
        )));
    }
    let mut f = sys::memfd_with(&[]).map_err(HttpError::io("making the --size pattern"))?;
    let period: Vec<u8> = (0..PERIOD).map(|i| (i % 251) as u8).collect();
    f.write_all(&period).map_err(HttpError::io(format!(
        "making the --size pattern ({PERIOD} bytes in memory)"
    )))?;
    Ok(f)
}

/// Where byte `off` of the generated object is in the pattern file, and how
/// many bytes from there are contiguous (at most `want`).
pub fn in_pattern(off: u64, want: u64) -> (u64, u64) {
    let at = off % PERIOD;
    (at, want.min(PERIOD - at))
}

/// Warms (reads once) or evicts every regular file under `root`.
pub fn prepare_cache(root: &Path, cold: bool) -> CacheState {
    let mut state = CacheState {
        warmed: !cold,
        cold,
        ..Default::default()
    };
    let mut stack = vec![root.to_path_buf()];
    let mut buf = vec![0u8; 1 << 20];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                let Ok(mut f) = File::open(e.path()) else {
                    continue;
                };
                state.files += 1;
                if cold {
                    // Dirty pages stay until written back; flush them first.
                    let _ = f.sync_data();
                    let _ = ffi::evict_from_page_cache(&f);
                    state.bytes += f.metadata().map(|m| m.len()).unwrap_or(0);
                } else if state.bytes < WARM_LIMIT {
                    while let Ok(n) = f.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        state.bytes += n as u64;
                    }
                }
            }
        }
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_offsets_wrap_at_the_period() {
        assert_eq!(in_pattern(0, 10), (0, 10));
        assert_eq!(in_pattern(PERIOD - 3, 10), (PERIOD - 3, 3));
        assert_eq!(in_pattern(5 * PERIOD + 7, u64::MAX), (7, PERIOD - 7));
        assert_eq!(PERIOD % 251, 0);
        assert!(generated(MAX_SIZE + 1).is_err());
    }
}

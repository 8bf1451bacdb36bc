//! What the server sends: a generated object in memory (`--size`), or the
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

/// A memory file of `n` bytes of a repeating pattern (memfd: sendfile-able).
pub fn generated(n: u64) -> Result<File, HttpError> {
    let mut f = sys::memfd_with(&[]).map_err(HttpError::io("making the --size object"))?;
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..k]).map_err(HttpError::io(format!(
            "making the --size object of {n} bytes in memory"
        )))?;
        left -= k as u64;
    }
    Ok(f)
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

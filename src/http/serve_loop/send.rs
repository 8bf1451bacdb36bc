//! Sending an answer: the head, then the body by sendfile(2) (plain TCP,
//! corked for large bodies, and kTLS) or through rustls.

use super::{would_block, Conn, Source, State, Step, Transfer, Worker};
use super::{CORK_FROM, SENDFILE_CHUNK, SEND_BUDGET, TLS_CHUNK};
use crate::http::content;
use crate::http::serve_shared::Body;
use crate::sys::tls as ffi;
use crate::sys::{self, Interest};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl Worker<'_> {
    pub(super) fn send(&mut self, conn: &mut Conn) -> io::Result<Option<Step>> {
        let done = if conn.tls.is_some() {
            self.send_tls(conn)?
        } else {
            self.send_plain(conn)?
        };
        if !done {
            return Ok(Some(Step::Wait(Interest::WRITE)));
        }
        // The whole answer is out (or queued in the socket).
        let had_body = conn.body.take();
        if let Some(Transfer {
            source: Source::File(f),
            ..
        }) = &had_body
        {
            if self.sh.cold {
                // Pages still referenced by the socket stay; the rest go.
                let _ = ffi::evict_from_page_cache(f);
            }
        }
        if std::mem::take(&mut conn.served) {
            conn.stats.requests.fetch_add(1, Ordering::Relaxed);
        }
        conn.out.clear();
        conn.out_at = 0;
        if !conn.keep_alive || self.sh.stopping() {
            return Ok(Some(self.linger(conn)));
        }
        conn.state = State::Head;
        conn.deadline = Instant::now() + self.sh.request_timeout;
        Ok(None)
    }

    /// Plain TCP and kTLS: the head with MSG_MORE, the body by sendfile.
    /// `Ok(true)` when all is sent, `Ok(false)` when the socket is full.
    pub(super) fn send_plain(&mut self, conn: &mut Conn) -> io::Result<bool> {
        let fd = conn.sock.as_raw_fd();
        let large = conn
            .body
            .as_ref()
            .is_some_and(|b| b.end - b.off >= CORK_FROM);
        if large && !conn.corked {
            conn.corked = sys::set_cork(fd, true).is_ok();
        }
        let done = self.send_plain_corked(conn)?;
        if done && std::mem::take(&mut conn.corked) {
            sys::set_cork(fd, false)?;
        }
        Ok(done)
    }

    pub(super) fn send_plain_corked(&mut self, conn: &mut Conn) -> io::Result<bool> {
        let fd = conn.sock.as_raw_fd();
        while conn.out_at < conn.out.len() {
            let more = conn.body.is_some();
            match sys::send_nonblocking(fd, &conn.out[conn.out_at..], more) {
                Ok(n) => {
                    conn.out_at += n;
                    self.sh.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        let Some(body) = conn.body.as_mut() else {
            return Ok(true);
        };
        let mut budget = SEND_BUDGET;
        while body.off < body.end {
            let want = (body.end - body.off).min(SENDFILE_CHUNK);
            let (file, mut pos, count) = match &body.source {
                Source::Pattern => {
                    let Body::Pattern(f, _) = &self.sh.body else {
                        return Err(io::Error::other("no generated object"));
                    };
                    let (at, n) = content::in_pattern(body.off, want);
                    (f, at as i64, n)
                }
                Source::File(f) => (f, body.off as i64, want),
            };
            match sys::sendfile(fd, file, &mut pos, count as usize) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file ended early (truncated while served?)",
                    ))
                }
                Ok(n) => {
                    body.off += n as u64;
                    conn.stats.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    self.sh.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    conn.last_progress = Instant::now();
                    budget = budget.saturating_sub(n as u64);
                    if budget == 0 && body.off < body.end {
                        // Level-triggered: the loop comes back at once,
                        // after the other ready connections had a turn.
                        return Ok(false);
                    }
                }
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// User-space TLS: plaintext into rustls from pread chunks, records out.
    pub(super) fn send_tls(&mut self, conn: &mut Conn) -> io::Result<bool> {
        let Some(t) = conn.tls.as_mut() else {
            return Ok(true);
        };
        let mut budget = SEND_BUDGET;
        loop {
            while t.wants_write() {
                match t.write_tls(&mut conn.sock) {
                    Ok(_) => conn.last_progress = Instant::now(),
                    Err(e) if would_block(&e) => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
            if budget == 0 {
                return Ok(false);
            }
            if conn.out_at < conn.out.len() {
                let n = t.writer().write(&conn.out[conn.out_at..])?;
                conn.out_at += n;
                self.sh.wire_bytes.fetch_add(n as u64, Ordering::Relaxed);
                continue;
            }
            let Some(body) = conn.body.as_mut() else {
                return Ok(true);
            };
            if body.off >= body.end {
                return Ok(true);
            }
            let want = (body.end - body.off).min(TLS_CHUNK as u64);
            let n = match &body.source {
                Source::Pattern => {
                    let Body::Pattern(f, _) = &self.sh.body else {
                        return Err(io::Error::other("no generated object"));
                    };
                    let (at, k) = content::in_pattern(body.off, want);
                    f.read_at(&mut self.scratch[..k as usize], at)?
                }
                Source::File(f) => f.read_at(&mut self.scratch[..want as usize], body.off)?,
            };
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file ended early (truncated while served?)",
                ));
            }
            let took = t.writer().write(&self.scratch[..n])?;
            body.off += took as u64;
            conn.stats.bytes.fetch_add(took as u64, Ordering::Relaxed);
            self.sh.wire_bytes.fetch_add(took as u64, Ordering::Relaxed);
            budget = budget.saturating_sub(took as u64);
        }
    }
}

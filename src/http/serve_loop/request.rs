//! A connection's way to its answer: the TLS handshake, the request head,
//! the request body read and discarded, and the answer chosen.

use super::{would_block, Conn, Source, State, Step, Transfer, Worker};
use crate::http::chunked::{self, ChunkError};
use crate::http::serve_shared::{Body, Refusal};
use crate::http::tls;
use crate::http::wire::{self, RangeAsk, Reject, RequestBody, MAX_HEAD, MAX_REQUEST_BODY};
use crate::sys::Interest;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::Instant;

impl Worker<'_> {
    pub(super) fn handshake(&mut self, conn: &mut Conn) -> io::Result<Option<Step>> {
        let Some(t) = conn.tls.as_mut() else {
            conn.state = State::Head;
            return Ok(None);
        };
        loop {
            while t.wants_write() {
                match t.write_tls(&mut conn.sock) {
                    Ok(_) => {}
                    Err(e) if would_block(&e) => {
                        return Ok(Some(Step::Wait(Interest {
                            read: true,
                            write: true,
                            exclusive: false,
                        })))
                    }
                    Err(e) => return Err(e),
                }
            }
            if !t.is_handshaking() {
                break;
            }
            match t.read_tls(&mut conn.sock) {
                Ok(0) => return Ok(Some(Step::Close)),
                Ok(_) => {}
                Err(e) if would_block(&e) => return Ok(Some(Step::Wait(Interest::READ))),
                Err(e) => return Err(e),
            }
            if let Err(e) = t.process_new_packets() {
                // rustls queued an alert: send it, then close.
                while t.wants_write() {
                    if t.write_tls(&mut conn.sock).is_err() {
                        break;
                    }
                }
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("TLS handshake: {e}"),
                ));
            }
        }
        tls::remember_version(&self.sh.tls_version, t);
        conn.state = State::Head;
        if conn.ktls_pending {
            let Some(mut t) = conn.tls.take() else {
                return Ok(None);
            };
            // A client's first request often comes with its Finished, and
            // rustls has decrypted it already: the kernel will never see
            // it, so it is kept here (a slow server, e.g. a guest under
            // TCG, read both at once and waited forever for the request).
            loop {
                match t.reader().read(&mut self.scratch) {
                    Ok(n) if n > 0 => conn.inbuf.extend_from_slice(&self.scratch[..n]),
                    _ => break,
                }
            }
            let tls13 = t.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3);
            let secrets = (*t)
                .dangerous_extract_secrets()
                .map_err(|e| io::Error::other(format!("kTLS: extracting the session keys: {e}")))?;
            tls::enable_ktls(conn.sock.as_raw_fd(), tls13, secrets)
                .map_err(|e| io::Error::other(e.to_string()))?;
            self.sh.ktls_used.store(true, Ordering::Relaxed);
        }
        Ok(None)
    }

    /// Reads what has arrived (decrypting for TLS) into `inbuf`, up to
    /// `cap` bytes held. `Ok(false)`: nothing more now; `Ok(true)`: the
    /// client closed its side.
    pub(super) fn fill(&mut self, conn: &mut Conn, cap: usize) -> io::Result<bool> {
        let before = conn.inbuf.len();
        let eof = match conn.tls.as_mut() {
            None => loop {
                let room = cap.saturating_sub(conn.inbuf.len()).min(self.scratch.len());
                if room == 0 {
                    break false;
                }
                match conn.sock.read(&mut self.scratch[..room]) {
                    Ok(0) => break true,
                    Ok(n) => conn.inbuf.extend_from_slice(&self.scratch[..n]),
                    Err(e) if would_block(&e) => break false,
                    Err(e) => return Err(e),
                }
            },
            Some(t) => 'tls: loop {
                // Plaintext rustls already holds first, then the socket.
                loop {
                    let room = cap.saturating_sub(conn.inbuf.len()).min(self.scratch.len());
                    if room == 0 {
                        break 'tls false;
                    }
                    match t.reader().read(&mut self.scratch[..room]) {
                        Ok(0) => break 'tls true,
                        Ok(n) => conn.inbuf.extend_from_slice(&self.scratch[..n]),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break 'tls true,
                        Err(e) => return Err(e),
                    }
                }
                match t.read_tls(&mut conn.sock) {
                    Ok(0) => {
                        // The socket ended; what rustls holds is read next time.
                        let _ = t.process_new_packets();
                        break true;
                    }
                    Ok(_) => {
                        if let Err(e) = t.process_new_packets() {
                            while t.wants_write() {
                                if t.write_tls(&mut conn.sock).is_err() {
                                    break;
                                }
                            }
                            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                        }
                    }
                    Err(e) if would_block(&e) => break false,
                    Err(e) => return Err(e),
                }
            },
        };
        let got = conn.inbuf.len() - before;
        self.sh.wire_bytes.fetch_add(got as u64, Ordering::Relaxed);
        // An end with bytes still unread is handled when they are parsed.
        Ok(eof && got == 0)
    }

    pub(super) fn head(&mut self, conn: &mut Conn) -> io::Result<Option<Step>> {
        loop {
            if !conn.inbuf.is_empty() {
                match wire::parse_request(&conn.inbuf) {
                    Ok(req) => {
                        conn.inbuf.drain(..req.len);
                        match req.body {
                            RequestBody::Length(0) => self.respond(conn, &req),
                            RequestBody::Length(left) => conn.state = State::Discard { left, req },
                            RequestBody::Chunked => {
                                conn.state = State::DiscardChunked {
                                    dec: chunked::Decoder::with_limit(MAX_REQUEST_BODY),
                                    req,
                                }
                            }
                        }
                        return Ok(None);
                    }
                    Err(Reject::Partial) => {}
                    Err(Reject::Status(s)) => {
                        // The request's end is unknown: answer and close.
                        self.answer_error(conn, s, false);
                        return Ok(None);
                    }
                    Err(Reject::Http2) => {
                        // Counted as the HTTP/1.1 answer it stands for.
                        self.answer_error(conn, 505, false);
                        conn.out = wire::http2_refusal();
                        return Ok(None);
                    }
                }
            }
            if conn.inbuf.len() >= MAX_HEAD {
                self.answer_error(conn, 431, false);
                return Ok(None);
            }
            let had = conn.inbuf.len();
            let eof = self.fill(conn, MAX_HEAD)?;
            if eof {
                return Ok(Some(Step::Close));
            }
            if conn.inbuf.len() == had {
                return Ok(Some(Step::Wait(Interest::READ)));
            }
        }
    }

    pub(super) fn discard(&mut self, conn: &mut Conn) -> io::Result<Option<Step>> {
        loop {
            let State::Discard { left, .. } = &mut conn.state else {
                return Ok(None);
            };
            let take = (*left).min(conn.inbuf.len() as u64) as usize;
            conn.inbuf.drain(..take);
            self.sh
                .request_body_bytes
                .fetch_add(take as u64, Ordering::Relaxed);
            *left -= take as u64;
            if *left == 0 {
                let State::Discard { req, .. } = std::mem::replace(&mut conn.state, State::Head)
                else {
                    return Ok(None);
                };
                self.respond(conn, &req);
                return Ok(None);
            }
            let want = (*left).min(self.scratch.len() as u64) as usize;
            if self.fill(conn, want)? {
                return Ok(Some(Step::Close));
            }
            if conn.inbuf.is_empty() {
                return Ok(Some(Step::Wait(Interest::READ)));
            }
        }
    }

    /// A chunked body, decoded as it arrives: what `inbuf` holds goes
    /// through the decoder and away, so a body is never held whole, and
    /// what follows its end stays for the next request. Malformed
    /// chunking gets 400, a body over [`MAX_REQUEST_BODY`] 413 (as soon as
    /// a chunk size says so), and both close the connection.
    pub(super) fn discard_chunked(&mut self, conn: &mut Conn) -> io::Result<Option<Step>> {
        loop {
            let State::DiscardChunked { dec, .. } = &mut conn.state else {
                return Ok(None);
            };
            let done = match dec.feed(&conn.inbuf) {
                Ok(fed) => {
                    conn.inbuf.drain(..fed.used);
                    self.sh
                        .request_body_bytes
                        .fetch_add(fed.body, Ordering::Relaxed);
                    dec.is_done()
                }
                Err(e) => {
                    let status = match e {
                        ChunkError::TooLarge { .. } => 413,
                        _ => 400,
                    };
                    self.answer_error(conn, status, false);
                    return Ok(None);
                }
            };
            if done {
                let State::DiscardChunked { req, .. } =
                    std::mem::replace(&mut conn.state, State::Head)
                else {
                    return Ok(None);
                };
                self.respond(conn, &req);
                return Ok(None);
            }
            let cap = self.scratch.len();
            if self.fill(conn, cap)? {
                return Ok(Some(Step::Close));
            }
            if conn.inbuf.is_empty() {
                return Ok(Some(Step::Wait(Interest::READ)));
            }
        }
    }

    pub(super) fn answer_error(&mut self, conn: &mut Conn, status: u16, keep: bool) {
        self.sh.count_status(status);
        conn.out = wire::error_response(status, keep);
        conn.out_at = 0;
        conn.body = None;
        conn.keep_alive = keep;
        conn.state = State::Send;
        conn.last_progress = Instant::now();
    }

    /// Sets up the answer to one request (head in `out`, body to send).
    pub(super) fn respond(&mut self, conn: &mut Conn, req: &wire::RequestHead) {
        let (source, len) = match &self.sh.body {
            Body::Pattern(_, n) => (Source::Pattern, *n),
            Body::Root(root) => match wire::resolve(root, &req.target) {
                Ok(p) => match File::open(&p).and_then(|f| f.metadata().map(|m| (f, m.len()))) {
                    Ok((f, n)) => (Source::File(f), n),
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                        self.sh.refused(Refusal::Descriptors);
                        return self.answer_error(conn, 503, false);
                    }
                    Err(_) => return self.answer_error(conn, 404, req.keep_alive),
                },
                Err(status) => return self.answer_error(conn, status, req.keep_alive),
            },
        };
        let (status, start, count, mut extra) = match wire::parse_range(req.range.as_deref(), len) {
            RangeAsk::Whole => (200, 0, len, vec![]),
            RangeAsk::Part { start, end } => (
                206,
                start,
                end - start + 1,
                vec![("Content-Range", format!("bytes {start}-{end}/{len}"))],
            ),
            RangeAsk::Unsatisfiable => {
                self.sh.count_status(416);
                conn.out = wire::response_head(
                    416,
                    &[
                        ("Content-Range", format!("bytes */{len}")),
                        ("Content-Length", "0".into()),
                    ],
                    req.keep_alive,
                );
                conn.out_at = 0;
                conn.body = None;
                conn.keep_alive = req.keep_alive;
                conn.state = State::Send;
                return;
            }
        };
        extra.push(("Content-Length", count.to_string()));
        extra.push(("Content-Type", "application/octet-stream".into()));
        extra.push(("Accept-Ranges", "bytes".into()));
        self.sh.count_status(status);
        conn.out = wire::response_head(status, &extra, req.keep_alive);
        conn.out_at = 0;
        conn.body = (!req.head && count > 0).then_some(Transfer {
            source,
            off: start,
            end: start + count,
        });
        conn.keep_alive = req.keep_alive;
        conn.served = true;
        conn.state = State::Send;
        conn.last_progress = Instant::now();
    }
}

//! HTTP/1.1's steps of a download connection, as methods of
//! `client_loop`'s `Driver`: send the request (built once), read the
//! response head (parsed by `wire`), discard the body (MSG_TRUNC on plain
//! TCP, rustls or kTLS otherwise) of a known length, chunked (decoded by
//! `chunked`) or until the server closes, and read an idle kept-alive
//! socket.

use super::chunked::{self, ChunkError};
use super::client_conn::{would_block, Conn, Link, State};
use super::client_loop::{no_link, Driver, Step, DISCARD};
use super::client_shared::{Failure, Kind};
use super::wire::{self, ResponseBody};
use crate::proto::http::HttpMethod;
use crate::sys::{self, Interest};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Body bytes one connection reads per wake-up before the others get a
/// turn (level triggered: it is woken again at once).
const READ_BUDGET: u64 = 16 << 20;

impl Driver {
    pub(super) fn send(&mut self, c: &mut Conn, mut at: usize) -> Result<Step, Failure> {
        let link = c.link.as_mut().ok_or_else(no_link)?;
        let tls = link.tls();
        let Link {
            sock, tls: session, ..
        } = link;
        match session.as_mut() {
            Some(t) => {
                while t.wants_write() {
                    match t.write_tls(sock) {
                        Ok(_) => {}
                        Err(e) if would_block(&e) => return Ok(Step::Wait(Interest::WRITE)),
                        Err(e) => return Err(Failure::io("sending a request", tls)(e)),
                    }
                }
            }
            None => {
                while at < self.request.len() {
                    match sys::send_nonblocking(sock.as_raw_fd(), &self.request[at..], false) {
                        Ok(n) => at += n,
                        Err(e) if would_block(&e) => {
                            c.state = State::Sending { at };
                            return Ok(Step::Wait(Interest::WRITE));
                        }
                        Err(e) => return Err(Failure::io("sending a request", tls)(e)),
                    }
                }
            }
        }
        // The answer cannot be there yet: wait for it rather than try a read.
        c.state = State::Head;
        Ok(Step::Wait(Interest::READ))
    }

    pub(super) fn head(&mut self, c: &mut Conn, now: Instant) -> Result<Step, Failure> {
        let link = c.link.as_mut().ok_or_else(no_link)?;
        let tls = link.tls();
        let resp = loop {
            match link.read(&mut c.head[c.have..], &mut self.wire) {
                Ok(0) if c.have == 0 => {
                    return Err(Failure::protocol(
                        "the server closed the connection without answering a request",
                        Kind::Reset,
                    ))
                }
                Ok(0) => {
                    return Err(Failure::protocol(
                        "the server closed the connection mid-response",
                        Kind::Reset,
                    ))
                }
                Ok(n) => {
                    c.first.get_or_insert(now);
                    c.have += n;
                    if let Some(r) = wire::parse_response(&c.head[..c.have])? {
                        break r;
                    }
                }
                Err(e) if would_block(&e) => return Ok(Step::Wait(Interest::READ)),
                Err(e) => return Err(Failure::io("reading a response", tls)(e)),
            }
        };
        // A HEAD response's Content-Length is the GET's, and 204 and 304
        // have no body: none follows the head.
        let bodiless =
            self.sh.spec.request.method == HttpMethod::Head || matches!(resp.status, 204 | 304);
        if let ResponseBody::Length(len) = resp.body {
            self.sh.object_bytes.fetch_max(len, Ordering::Relaxed);
        }
        c.status = resp.status;
        c.keep_alive = resp.keep_alive;
        c.quiet = now;
        // Body bytes that came with the head.
        let early = &c.head[resp.len..c.have];
        let framing = if bodiless {
            ResponseBody::Length(0)
        } else {
            resp.body
        };
        let (state, got) = match framing {
            ResponseBody::Length(len) => {
                let got = early.len() as u64;
                if got > len {
                    return Err(past_the_end(got - len));
                }
                (State::Body { left: len - got }, got)
            }
            ResponseBody::Chunked => {
                let mut dec = chunked::Decoder::new();
                let fed = dec.feed(early).map_err(bad_chunking)?;
                if fed.used < early.len() {
                    return Err(past_the_end((early.len() - fed.used) as u64));
                }
                (State::Chunked(dec), fed.body)
            }
            ResponseBody::UntilClose => {
                // The close ends the body: this connection takes no more.
                c.keep_alive = false;
                let got = early.len() as u64;
                (State::UntilClose { got }, got)
            }
        };
        c.st.bytes.fetch_add(got, Ordering::Relaxed);
        c.state = state;
        Ok(Step::Go)
    }

    pub(super) fn body(
        &mut self,
        c: &mut Conn,
        mut left: u64,
        now: Instant,
    ) -> Result<Step, Failure> {
        let link = c.link.as_mut().ok_or_else(no_link)?;
        let tls = link.tls();
        let mut taken = 0u64;
        while left > 0 {
            if taken >= READ_BUDGET {
                link.wait_for(left);
                c.state = State::Body { left };
                return Ok(Step::Wait(Interest::READ));
            }
            let want = left.min(DISCARD as u64) as usize;
            match link.discard(&mut self.discard[..want], &mut self.wire) {
                Ok(0) => {
                    return Err(Failure::protocol(
                        "the server closed the connection mid-body",
                        Kind::Reset,
                    ))
                }
                Ok(n) => {
                    left -= n as u64;
                    taken += n as u64;
                    c.st.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    c.quiet = now;
                    // A TCP read short of what was asked emptied the socket:
                    // back to epoll without a read that would only block.
                    // (A TLS or kTLS read stops at a record's end: not so.)
                    if n < want && left > 0 && !tls {
                        link.wait_for(left);
                        c.state = State::Body { left };
                        return Ok(Step::Wait(Interest::READ));
                    }
                }
                Err(e) if would_block(&e) => {
                    link.wait_for(left);
                    c.state = State::Body { left };
                    return Ok(Step::Wait(Interest::READ));
                }
                Err(e) => return Err(Failure::io("reading a body", tls)(e)),
            }
        }
        // The next response's head must wake the loop at its first byte.
        link.wait_for(0);
        self.complete(c, now);
        Ok(Step::Go)
    }

    /// A chunked body: a chunk's data is dropped as `body` drops a sized
    /// body (in the kernel on plain TCP), the framing between chunks is
    /// read and decoded; the decoded bytes are the goodput.
    pub(super) fn chunked(
        &mut self,
        c: &mut Conn,
        mut dec: chunked::Decoder,
        now: Instant,
    ) -> Result<Step, Failure> {
        let link = c.link.as_mut().ok_or_else(no_link)?;
        let tls = link.tls();
        let mut taken = 0u64;
        while !dec.is_done() {
            let left = dec.data_left();
            if taken >= READ_BUDGET {
                link.wait_for(left);
                c.state = State::Chunked(dec);
                return Ok(Step::Wait(Interest::READ));
            }
            let (want, read) = if left > 0 {
                let want = left.min(DISCARD as u64) as usize;
                (
                    want,
                    link.discard(&mut self.discard[..want], &mut self.wire),
                )
            } else {
                (DISCARD, link.read(&mut self.discard[..], &mut self.wire))
            };
            match read {
                Ok(0) => {
                    return Err(Failure::protocol(
                        "the server closed the connection mid-body (a chunked body without its last chunk)",
                        Kind::Reset,
                    ))
                }
                Ok(n) => {
                    let got = if left > 0 {
                        dec.skip(n as u64)
                    } else {
                        let fed = dec.feed(&self.discard[..n]).map_err(bad_chunking)?;
                        if fed.used < n {
                            return Err(past_the_end((n - fed.used) as u64));
                        }
                        fed.body
                    };
                    taken += n as u64;
                    c.st.bytes.fetch_add(got, Ordering::Relaxed);
                    c.quiet = now;
                    // As in `body`: a short plain TCP read emptied the socket.
                    if n < want && !dec.is_done() && !tls {
                        link.wait_for(dec.data_left());
                        c.state = State::Chunked(dec);
                        return Ok(Step::Wait(Interest::READ));
                    }
                }
                Err(e) if would_block(&e) => {
                    link.wait_for(left);
                    c.state = State::Chunked(dec);
                    return Ok(Step::Wait(Interest::READ));
                }
                Err(e) => return Err(Failure::io("reading a body", tls)(e)),
            }
        }
        self.sh
            .object_bytes
            .fetch_max(dec.body_bytes(), Ordering::Relaxed);
        link.wait_for(0);
        self.complete(c, now);
        Ok(Step::Go)
    }

    /// A body that ends when the server closes the connection (no length,
    /// no chunking: RFC 9112 6.3, item 8).
    pub(super) fn until_close(
        &mut self,
        c: &mut Conn,
        mut got: u64,
        now: Instant,
    ) -> Result<Step, Failure> {
        let link = c.link.as_mut().ok_or_else(no_link)?;
        let tls = link.tls();
        let mut taken = 0u64;
        loop {
            if taken >= READ_BUDGET {
                c.state = State::UntilClose { got };
                return Ok(Step::Wait(Interest::READ));
            }
            match link.discard(&mut self.discard[..], &mut self.wire) {
                Ok(0) => break,
                Ok(n) => {
                    got += n as u64;
                    taken += n as u64;
                    c.st.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    c.quiet = now;
                }
                Err(e) if would_block(&e) => {
                    c.state = State::UntilClose { got };
                    return Ok(Step::Wait(Interest::READ));
                }
                Err(e) => return Err(Failure::io("reading a body", tls)(e)),
            }
        }
        self.sh.object_bytes.fetch_max(got, Ordering::Relaxed);
        c.keep_alive = false;
        self.complete(c, now);
        Ok(Step::Go)
    }

    /// An idle kept-alive socket is readable: the server closed it (the
    /// next request opens another), or sent bytes nobody asked for.
    pub(super) fn idle_read(&mut self, c: &mut Conn, now: Instant) {
        let Some(link) = c.link.as_mut() else {
            return;
        };
        match link.read(&mut c.head[..], &mut self.wire) {
            Err(e) if would_block(&e) => {}
            Ok(0) | Err(_) => self.close(c),
            Ok(n) => {
                let f = Failure::protocol(
                    format!("the server sent {n} bytes with no request outstanding"),
                    Kind::Protocol,
                );
                self.fail(c, f, now);
                self.advance(c, now);
            }
        }
    }
}

fn bad_chunking(e: ChunkError) -> Failure {
    Failure::protocol(
        format!("malformed chunked body: {e} (RFC 9112 7.1)"),
        Kind::Protocol,
    )
}

/// Bytes after a whole response: nothing was asked for them (one request
/// at a time, no pipelining).
fn past_the_end(n: u64) -> Failure {
    Failure::protocol(
        format!("the server sent {n} bytes past the end of its response"),
        Kind::Protocol,
    )
}

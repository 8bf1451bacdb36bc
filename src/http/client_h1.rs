//! HTTP/1.1's steps of a download connection, as methods of
//! `client_loop`'s `Driver`: send the request (built once), read the
//! response head (parsed by `wire`), discard the body (MSG_TRUNC on plain
//! TCP, rustls or kTLS otherwise), and read an idle kept-alive socket.

use super::client_conn::{would_block, Conn, Link, State};
use super::client_loop::{no_link, Driver, Step, DISCARD};
use super::client_shared::{Failure, Kind};
use super::wire;
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
        let Some(len) = resp.content_length.or(bodiless.then_some(0)) else {
            return Err(Failure::protocol(
                format!(
                    "HTTP {} without Content-Length; linerate needs sized bodies",
                    resp.status
                ),
                Kind::Protocol,
            ));
        };
        self.sh.object_bytes.fetch_max(len, Ordering::Relaxed);
        let len = if bodiless { 0 } else { len };
        let early = ((c.have - resp.len) as u64).min(len);
        c.st.bytes.fetch_add(early, Ordering::Relaxed);
        c.status = resp.status;
        c.keep_alive = resp.keep_alive;
        c.quiet = now;
        c.state = State::Body { left: len - early };
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

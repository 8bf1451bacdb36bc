//! HTTP/2 downloads (`--http2`) on the HTTP/1.1 client's event loops: the
//! steps of a connection that differ, as methods of `client_loop`'s
//! `Driver`. The connect, TLS (ALPN `h2`; clear text is h2c with prior
//! knowledge), schedule, budget, stalls and figures are the loop's; the
//! protocol is `h2::conn::Session`'s. One stream per connection at a time,
//! as h2load does by default.
//!
//! Every byte read from a socket is counted (frames, TLS framing), so the
//! wire cross-check holds as for HTTP/1.1. A request that fails is counted
//! by kind; a server that ends a connection gracefully (GOAWAY with no
//! error) before it took a request costs a new connection, not a failed
//! request.

use super::client_conn::{would_block, Conn, Link, State};
use super::client_loop::{no_link, Driver, Step};
use super::client_shared::{Failure, Kind, Shared};
use super::h2::conn::{Answer, ConnError, Session};
use super::h2::{frame, hpack};
use super::HttpError;
use crate::proto::http::HttpMethod;
use crate::sys::{self, Interest};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Body bytes one connection reads per wake-up before the others get a
/// turn (level triggered: it is woken again at once).
const READ_BUDGET: usize = 16 << 20;
const READ_WRITE: Interest = Interest {
    read: true,
    write: true,
    exclusive: false,
};

/// The request's header block: every request of the run is the same
/// (`--method`, `--header`; content-length with `--body`), only its
/// stream id changes.
pub(super) fn request_block(sh: &Shared) -> Result<hpack::RequestBlock, HttpError> {
    let tls = sh.spec.tls.is_some();
    let host = &sh.spec.host;
    let path = &sh.spec.path;
    if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(HttpError::Config(format!(
            "'{path}' is not a path HTTP/2 can send; give a path that starts with / and has no \
             spaces or control characters"
        )));
    }
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.clone()
    };
    let port = sh.spec.target.port();
    let authority = if port == if tls { 443 } else { 80 } {
        host
    } else {
        format!("{host}:{port}")
    };
    let agent = concat!("linerate/", env!("CARGO_PKG_VERSION"));
    let r = &sh.spec.request;
    let mut f = hpack::RequestFields::new(tls, r.method.as_str(), path, &authority, agent);
    for (name, value) in &r.headers {
        f.header(name, value);
    }
    if !r.body.is_empty() {
        f.content_length(r.body.len());
    }
    Ok(f.encode())
}

impl Driver {
    /// A request on the connection: its session (made at the connection's
    /// first request, after TLS agreed on h2) queues the HEADERS.
    pub(super) fn h2_start(&mut self, c: &mut Conn, now: Instant) -> Result<Step, Failure> {
        let target = self.sh.spec.target;
        let link = c.link.as_ref().ok_or_else(no_link)?;
        if c.h2.is_none() {
            if let Some(t) = link.tls.as_ref() {
                if t.alpn_protocol() != Some(b"h2".as_slice()) {
                    return Err(no_alpn(target));
                }
            }
            c.h2 = Some(Box::new(Session::new()));
        }
        let (Some(s), Some(block)) = (c.h2.as_mut(), self.h2_block.as_ref()) else {
            return Err(no_link());
        };
        let head = self.sh.spec.request.method == HttpMethod::Head;
        if !s.request_with(block, &self.body, head) {
            // `begin` closed a connection that takes no more requests.
            return Err(no_link());
        }
        c.t0 = now;
        c.first = None;
        c.state = State::Sending { at: 0 };
        Ok(Step::Go)
    }

    /// Sending, waiting for the response or reading its body.
    pub(super) fn h2_step(&mut self, c: &mut Conn, now: Instant) -> Result<Step, Failure> {
        let target = self.sh.spec.target;
        let (Some(link), Some(s)) = (c.link.as_mut(), c.h2.as_mut()) else {
            return Err(no_link());
        };
        let tls = link.tls();
        if matches!(c.state, State::Sending { .. }) {
            if !flush(link, s).map_err(Failure::io("sending a request", tls))? {
                return Ok(Step::Wait(Interest::WRITE));
            }
            // The answer cannot be there yet: wait for it rather than try a read.
            c.state = State::Head;
            return Ok(Step::Wait(Interest::READ));
        }
        let mut taken = 0;
        let answer = loop {
            let room = s.spare();
            let want = room.len();
            let n = match link.read(room, &mut self.wire) {
                // The socket ended: a request the server did not take may
                // go again; any other is cut.
                Ok(0) => break s.answer(),
                Ok(n) => n,
                Err(e) if would_block(&e) => return wait(link, s, tls),
                Err(e) => return Err(Failure::io("reading a response", tls)(e)),
            };
            s.filled(n);
            taken += n;
            let p = s.process().map_err(|e| conn_failure(e, target))?;
            if p.headers {
                c.first.get_or_insert(now);
                if let Some(len) = s.response_head().and_then(|h| h.content_length) {
                    self.sh.object_bytes.fetch_max(len, Ordering::Relaxed);
                }
                c.state = State::Body { left: 0 };
            }
            if p.body > 0 {
                c.st.bytes.fetch_add(p.body, Ordering::Relaxed);
                c.quiet = now;
            }
            match s.answer() {
                Answer::Pending => {}
                a => break a,
            }
            // A plain read short of the room emptied the socket; a budget
            // spent gives the other connections their turn.
            if (n < want && !tls) || taken >= READ_BUDGET {
                return wait(link, s, tls);
            }
        };
        self.h2_answer(c, answer, now)
    }

    /// The request under way got its answer.
    fn h2_answer(&mut self, c: &mut Conn, answer: Answer, now: Instant) -> Result<Step, Failure> {
        let target = self.sh.spec.target;
        match answer {
            Answer::Done(status) => {
                let (Some(link), Some(s)) = (c.link.as_mut(), c.h2.as_mut()) else {
                    return Err(no_link());
                };
                s.finish();
                // Acknowledgements and window updates go now if they can;
                // what is left goes with the next request.
                c.keep_alive = s.can_request() && flush(link, s).is_ok();
                c.status = status;
                self.complete(c, now);
                Ok(Step::Go)
            }
            Answer::Refused if !c.retried => {
                c.retried = true;
                self.close(c);
                self.connect(c, now)
            }
            Answer::Refused => Err(Failure::new(
                Kind::Reset,
                HttpError::Protocol(format!(
                    "{target}: the server ended the HTTP/2 connection before the request was \
                     taken, twice"
                )),
            )),
            Answer::Reset(code) => Err(code_failure(code, "stream", target)),
            Answer::GoAway(code) => Err(code_failure(code, "connection", target)),
            Answer::Pending => Err(Failure::new(
                Kind::Reset,
                HttpError::Protocol(format!(
                    "{target}: the HTTP/2 connection ended in the middle of a request"
                )),
            )),
        }
    }

    /// An idle connection's socket is readable: the server's SETTINGS,
    /// PING or GOAWAY, or its close. A GOAWAY or a close ends the
    /// connection quietly (the next request opens another); frames that
    /// break the protocol fail it.
    pub(super) fn h2_idle(&mut self, c: &mut Conn, now: Instant) {
        let target = self.sh.spec.target;
        let (Some(link), Some(s)) = (c.link.as_mut(), c.h2.as_mut()) else {
            return;
        };
        let read = link.read(s.spare(), &mut self.wire);
        match read {
            Err(e) if would_block(&e) => {}
            Ok(0) | Err(_) => self.close(c),
            Ok(n) => {
                s.filled(n);
                match s.process() {
                    Ok(_) if s.can_request() => {
                        if flush(link, s).is_err() {
                            self.close(c);
                        }
                    }
                    Ok(_) => self.close(c),
                    Err(e) => {
                        self.fail(c, conn_failure(e, target), now);
                        self.advance(c, now);
                    }
                }
            }
        }
    }
}

/// What the loop waits for after a read found nothing more: the socket's
/// next bytes, and room to write what the session owes the server.
fn wait(link: &mut Link, s: &mut Session, tls: bool) -> Result<Step, Failure> {
    let done = flush(link, s).map_err(Failure::io("writing to the server", tls))?;
    Ok(Step::Wait(if done { Interest::READ } else { READ_WRITE }))
}

/// Writes what the session owes the server: true when all of it went.
fn flush(link: &mut Link, s: &mut Session) -> io::Result<bool> {
    let Link {
        sock, tls: session, ..
    } = link;
    match session.as_mut() {
        Some(t) => {
            let out = s.outgoing();
            if !out.is_empty() {
                t.writer().write_all(out)?;
                let n = out.len();
                s.wrote(n);
            }
            while t.wants_write() {
                match t.write_tls(sock) {
                    Ok(_) => {}
                    Err(e) if would_block(&e) => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
        }
        None => {
            while !s.outgoing().is_empty() {
                match sys::send_nonblocking(sock.as_raw_fd(), s.outgoing(), false) {
                    Ok(n) => s.wrote(n),
                    Err(e) if would_block(&e) => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(true)
}

fn no_alpn(target: SocketAddr) -> Failure {
    Failure::protocol(
        format!(
            "the server at {target} did not agree to HTTP/2 in the TLS handshake (ALPN h2); \
             leave out --http2 for HTTP/1.1, or turn HTTP/2 on in the server (nginx: \
             `listen ... ssl http2`)"
        ),
        Kind::Protocol,
    )
}

/// A connection that broke the protocol, said in the user's terms.
fn conn_failure(e: ConnError, target: SocketAddr) -> Failure {
    let why = match e {
        ConnError::Http1 => format!(
            "the server at {target} answered in HTTP/1.1: it does not speak HTTP/2 here (h2c \
             needs prior-knowledge support, e.g. nginx `listen ... http2`); leave out --http2 \
             for HTTP/1.1"
        ),
        e => format!(
            "{e}; the server at {target} may not speak HTTP/2 here (h2c needs prior-knowledge \
             support, e.g. nginx `listen ... http2`; leave out --http2 for HTTP/1.1)"
        ),
    };
    Failure::protocol(why, Kind::Protocol)
}

/// The server ended a stream (RST_STREAM) or the connection (GOAWAY) with
/// an error code.
fn code_failure(code: u32, what: &str, target: SocketAddr) -> Failure {
    if code == frame::HTTP_1_1_REQUIRED {
        return Failure::protocol(
            format!(
                "the server at {target} asked for HTTP/1.1 (HTTP_1_1_REQUIRED): it may not speak \
                 HTTP/2 here; leave out --http2 for HTTP/1.1"
            ),
            Kind::Protocol,
        );
    }
    Failure::protocol(
        format!(
            "the server at {target} ended the HTTP/2 {what} ({})",
            frame::code_name(code)
        ),
        Kind::Reset,
    )
}

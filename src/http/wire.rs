//! HTTP/1.1 wire details both sides share, with no I/O: request heads,
//! Range, status lines, request paths inside a root.

use super::HttpError;
use std::path::{Component, Path, PathBuf};

/// The largest request (or response) head either side accepts.
pub const MAX_HEAD: usize = 16 * 1024;
pub const MAX_HEADERS: usize = 64;
/// The largest request body the server reads (and discards); over it, 413.
pub const MAX_REQUEST_BODY: u64 = 1 << 20;

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        416 => "Range Not Satisfiable",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// A parsed request head: what the server acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub head: bool,
    pub target: String,
    pub keep_alive: bool,
    pub range: Option<String>,
    /// Bytes of the head, CRLFCRLF included.
    pub len: usize,
    /// The body after the head, read and discarded before the answer so a
    /// body is never taken for the next request.
    pub body: RequestBody,
}

/// How a request's body is framed (RFC 9112 section 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestBody {
    /// `Content-Length` bytes (0: no body).
    Length(u64),
    /// `Transfer-Encoding: chunked`, decoded by [`super::chunked`].
    Chunked,
}

/// Why a request gets an error answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// More bytes are needed (not an error yet).
    Partial,
    Status(u16),
    /// An HTTP/2 client's connection preface (h2c with prior knowledge):
    /// answered with [`http2_refusal`], not an HTTP/1.1 status it cannot read.
    Http2,
}

/// What an HTTP/2 client gets from a server that speaks HTTP/1.1 only
/// (RFC 9113 3.4, 5.4.1): the server's preface (an empty SETTINGS frame),
/// then GOAWAY with HTTP_1_1_REQUIRED and a line saying so, which h2load,
/// curl and nghttp print.
pub fn http2_refusal() -> Vec<u8> {
    const SETTINGS: u8 = 0x4;
    const GOAWAY: u8 = 0x7;
    const HTTP_1_1_REQUIRED: u32 = 0xd;
    let debug = b"linerate serve speaks HTTP/1.1 only; ask in HTTP/1.1 (h2load --h1)";
    let frame = |kind: u8, payload: &[u8]| {
        let len = payload.len() as u32;
        let mut f = len.to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[kind, 0, 0, 0, 0, 0]);
        f.extend_from_slice(payload);
        f
    };
    let mut goaway = 0u32.to_be_bytes().to_vec();
    goaway.extend_from_slice(&HTTP_1_1_REQUIRED.to_be_bytes());
    goaway.extend_from_slice(debug);
    let mut out = frame(SETTINGS, &[]);
    out.extend(frame(GOAWAY, &goaway));
    out
}

/// Parses a request head at the start of `buf`.
pub fn parse_request(buf: &[u8]) -> Result<RequestHead, Reject> {
    if buf.starts_with(b"PRI * HTTP/2.0\r\n") {
        return Err(Reject::Http2);
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return Err(if buf.len() >= MAX_HEAD {
                Reject::Status(431)
            } else {
                Reject::Partial
            })
        }
        Err(httparse::Error::TooManyHeaders) => return Err(Reject::Status(431)),
        Err(_) => return Err(Reject::Status(400)),
    };
    if len > MAX_HEAD {
        return Err(Reject::Status(431));
    }
    let version = req.version.unwrap_or(1);
    let method = req.method.unwrap_or("");
    let target = req.path.unwrap_or("").to_string();
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(|v| v.trim().to_string())
    };
    let connection = header("connection")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let keep_alive = if version == 1 {
        !connection.contains("close")
    } else {
        connection.contains("keep-alive")
    };
    // Every method `linerate http --method` sends gets the usual answer
    // (its body read and discarded first), so they are testable without
    // another server; HEAD gets the head alone.
    let head = match method {
        "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS" => false,
        "HEAD" => true,
        _ => return Err(Reject::Status(405)),
    };
    if version == 1 && header("host").is_none() {
        return Err(Reject::Status(400));
    }
    let body = body_framing(req.headers, version)?;
    Ok(RequestHead {
        head,
        target,
        keep_alive,
        range: header("range"),
        len,
        body,
    })
}

/// How a request's body is framed, from its framing headers (RFC 9112
/// section 6). Refused, and the connection closed since the next
/// request's start is unknown: `Content-Length` values that are not one
/// number (400), lengths over [`MAX_REQUEST_BODY`] (413), both
/// `Transfer-Encoding` and `Content-Length` (400: section 6.3 allows
/// taking it as an error, and a proxy in front that reads the other one
/// would see another request: smuggling), `Transfer-Encoding` on
/// HTTP/1.0 (400, section 6.1), a coding list whose final coding is not
/// `chunked` (400, section 6.3; `identity` too), that has codings before
/// it (501: the server decodes none) or `chunked` twice (400).
fn body_framing(headers: &[httparse::Header<'_>], version: u8) -> Result<RequestBody, Reject> {
    let mut length: Option<u64> = None;
    let mut codings = Codings::None;
    for h in headers {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            codings = codings.add(h.value, true);
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).map_err(|_| Reject::Status(400))?;
            // "5, 5" is one length said twice; "5, 6" is two.
            for part in v.split(',') {
                let p = part.trim();
                if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(Reject::Status(400));
                }
                let n: u64 = p.parse().map_err(|_| Reject::Status(400))?;
                if length.is_some_and(|l| l != n) {
                    return Err(Reject::Status(400));
                }
                length = Some(n);
            }
        }
    }
    match (codings, length) {
        (Codings::None, Some(n)) if n > MAX_REQUEST_BODY => Err(Reject::Status(413)),
        (Codings::None, n) => Ok(RequestBody::Length(n.unwrap_or(0))),
        (_, Some(_)) => Err(Reject::Status(400)),
        (_, None) if version == 0 => Err(Reject::Status(400)),
        (Codings::Chunked, None) => Ok(RequestBody::Chunked),
        (Codings::ChunkedAfterOthers, None) => Err(Reject::Status(501)),
        (Codings::NotChunkedLast { .. } | Codings::Broken, None) => Err(Reject::Status(400)),
    }
}

/// What the `Transfer-Encoding` fields of a message say, all of them read
/// as one list (RFC 9110 5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codings {
    /// No field (or, in a response, only `identity`, which RFC 9112
    /// dropped and servers still send).
    None,
    /// Exactly `chunked`.
    Chunked,
    /// Other codings, then `chunked` (once).
    ChunkedAfterOthers,
    /// Codings whose final one is not `chunked`.
    NotChunkedLast { had_chunked: bool },
    /// `chunked` twice (RFC 9112 6.1 forbids it), no coding at all, or
    /// not text.
    Broken,
}

impl Codings {
    /// The list so far with one more field's value. A request's field is
    /// read strictly (`identity` is a coding the server does not know, an
    /// empty value is broken); a response's leniently.
    fn add(self, value: &[u8], request: bool) -> Codings {
        let Ok(v) = std::str::from_utf8(value) else {
            return Codings::Broken;
        };
        let mut c = self;
        let mut any = false;
        for token in v.split(',').map(str::trim) {
            if token.is_empty() || (!request && token.eq_ignore_ascii_case("identity")) {
                continue;
            }
            any = true;
            let chunked = token.eq_ignore_ascii_case("chunked");
            c = match (c, chunked) {
                (Codings::Broken, _) => Codings::Broken,
                (Codings::None, true) => Codings::Chunked,
                (Codings::NotChunkedLast { had_chunked: false }, true) => {
                    Codings::ChunkedAfterOthers
                }
                (_, true) => Codings::Broken,
                (c, false) => Codings::NotChunkedLast {
                    had_chunked: matches!(
                        c,
                        Codings::Chunked
                            | Codings::ChunkedAfterOthers
                            | Codings::NotChunkedLast { had_chunked: true }
                    ),
                },
            };
        }
        if request && !any {
            return Codings::Broken;
        }
        c
    }
}

/// What a Range header asks of an object of `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAsk {
    /// The whole object (no header, or one the server may ignore:
    /// several ranges, another unit, bad syntax).
    Whole,
    /// Bytes start..=end.
    Part { start: u64, end: u64 },
    /// No byte of the object is in the range: 416.
    Unsatisfiable,
}

pub fn parse_range(header: Option<&str>, len: u64) -> RangeAsk {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return RangeAsk::Whole;
    };
    if spec.contains(',') {
        return RangeAsk::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeAsk::Whole;
    };
    let (a, b) = (a.trim(), b.trim());
    let num = |s: &str| s.parse::<u64>().ok();
    match (a.is_empty(), b.is_empty()) {
        // bytes=-N: the last N bytes.
        (true, false) => match num(b) {
            Some(0) => RangeAsk::Unsatisfiable,
            Some(n) if len > 0 => RangeAsk::Part {
                start: len.saturating_sub(n),
                end: len - 1,
            },
            Some(_) => RangeAsk::Unsatisfiable,
            None => RangeAsk::Whole,
        },
        (false, _) => {
            let Some(start) = num(a) else {
                return RangeAsk::Whole;
            };
            let end = if b.is_empty() {
                u64::MAX
            } else {
                match num(b) {
                    Some(e) if e >= start => e,
                    _ => return RangeAsk::Whole,
                }
            };
            if start >= len {
                RangeAsk::Unsatisfiable
            } else {
                RangeAsk::Part {
                    start,
                    end: end.min(len - 1),
                }
            }
        }
        (true, true) => RangeAsk::Whole,
    }
}

/// Where a request path leads inside `root` (canonical), or the status that
/// refuses it: 400 for a target that is not a path, 403 for anything that
/// would leave the root (`..`, a symlink out), 404 for what is not a file.
pub fn resolve(root: &Path, target: &str) -> Result<PathBuf, u16> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    if !path.starts_with('/') {
        return Err(400);
    }
    let decoded = percent_decode(path).ok_or(400u16)?;
    if decoded.contains(&0) {
        return Err(400);
    }
    let rel = String::from_utf8(decoded).map_err(|_| 400u16)?;
    let mut out = root.to_path_buf();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err(403),
            s => {
                // A segment must be one plain name (no separators of its own).
                let mut c = Path::new(s).components();
                match (c.next(), c.next()) {
                    (Some(Component::Normal(_)), None) => out.push(s),
                    _ => return Err(403),
                }
            }
        }
    }
    let real = out.canonicalize().map_err(|_| 404u16)?;
    if !real.starts_with(root) {
        return Err(403);
    }
    if !real.is_file() {
        return Err(404);
    }
    Ok(real)
}

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let h = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// A response head.
pub fn response_head(status: u16, extra: &[(&str, String)], keep_alive: bool) -> Vec<u8> {
    let mut s = format!(
        "HTTP/1.1 {status} {}\r\nServer: linerate\r\n",
        reason(status)
    );
    for (k, v) in extra {
        s.push_str(k);
        s.push_str(": ");
        s.push_str(v);
        s.push_str("\r\n");
    }
    s.push_str(if keep_alive {
        "Connection: keep-alive\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    s.into_bytes()
}

/// An error answer with a short text body.
pub fn error_response(status: u16, keep_alive: bool) -> Vec<u8> {
    let body = format!("{status} {}\n", reason(status));
    let mut v = response_head(
        status,
        &[
            ("Content-Type", "text/plain".into()),
            ("Content-Length", body.len().to_string()),
        ],
        keep_alive,
    );
    v.extend_from_slice(body.as_bytes());
    v
}

/// A parsed response head, for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub body: ResponseBody,
    pub keep_alive: bool,
    pub len: usize,
}

/// How a response's body is framed (RFC 9112 section 6.3), as its head
/// says; a HEAD request's answer and 204 and 304 have none whatever it
/// says, and the client knows which it asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseBody {
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding` with `chunked` last, decoded by [`super::chunked`].
    Chunked,
    /// Neither, or codings without `chunked` last: the body ends when the
    /// server closes the connection.
    UntilClose,
}

pub fn parse_response(buf: &[u8]) -> Result<Option<ResponseHead>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return Err(HttpError::Protocol(format!(
                "response head over {MAX_HEAD} bytes"
            )))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HttpError::Protocol(format!("malformed response: {e}"))),
    };
    // Values borrowed and compared without case, not lowered into new
    // strings: the client parses one head per request.
    let header = |name: &str| {
        resp.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(str::trim)
    };
    let codings = resp
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("transfer-encoding"))
        .fold(Codings::None, |c, h| c.add(h.value, false));
    let content_length = match header("content-length") {
        Some(v) => Some(
            v.parse::<u64>()
                .map_err(|_| HttpError::Protocol(format!("bad Content-Length '{v}'")))?,
        ),
        None => None,
    };
    let body = match (codings, content_length) {
        (Codings::None, Some(n)) => ResponseBody::Length(n),
        (Codings::None, None) => ResponseBody::UntilClose,
        // RFC 9112 6.3: Transfer-Encoding overrides, but a server that
        // sends both is broken in a way a load test should show.
        (_, Some(_)) => {
            return Err(HttpError::Protocol(
                "a response with both Transfer-Encoding and Content-Length \
                 (RFC 9112 6.3: a sender must not send both); fix the server"
                    .into(),
            ))
        }
        (Codings::Chunked | Codings::ChunkedAfterOthers, None) => ResponseBody::Chunked,
        (Codings::NotChunkedLast { .. }, None) => ResponseBody::UntilClose,
        (Codings::Broken, None) => {
            return Err(HttpError::Protocol(format!(
                "a Transfer-Encoding of '{}' (chunked twice, or not text)",
                header("transfer-encoding").unwrap_or("?")
            )))
        }
    };
    let close = header("connection").is_some_and(|v| {
        v.split(',')
            .any(|token| token.trim().eq_ignore_ascii_case("close"))
    });
    Ok(Some(ResponseHead {
        status: resp.code.unwrap_or(0),
        body,
        keep_alive: resp.version == Some(1) && !close,
        len,
    }))
}

#[cfg(test)]
mod tests;

//! One HTTP/2 client connection without its socket: bytes read go in
//! (`spare`, `filled`), `process` turns them into the state of the one
//! request under way (`answer`), and what the client owes the server
//! (its preface, SETTINGS and PING acknowledgements, WINDOW_UPDATEs, the
//! request's HEADERS) waits in `outgoing` for the event loop to write.
//!
//! Body bytes are counted where they lie in the read buffer, never copied;
//! a DATA frame need not be whole in the buffer. Every header block is
//! decoded (the HPACK context is the connection's), whichever stream it
//! belongs to.

use super::frame::{self, FrameError, PeerSettings};
use super::hpack::{self, HpackError};
use std::sync::Arc;

mod read;

/// Bytes read per turn: a few DATA frames of a large body at once.
const RECV_BUF: usize = 256 << 10;
/// The largest frame the client takes (its SETTINGS_MAX_FRAME_SIZE is the
/// default).
const MAX_FRAME: u32 = frame::DEFAULT_MAX_FRAME;
/// The longest header block kept across CONTINUATION frames.
const MAX_BLOCK: usize = 1 << 20;
/// Windows are given back in large steps: a WINDOW_UPDATE per this many
/// body bytes, far below the 2^31-1 each window starts with.
const REFILL: u32 = 1 << 28;
/// Every flow-control window's size until the peer says otherwise.
const DEFAULT_WINDOW: u32 = 65_535;

/// Why a connection cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnError {
    #[error("the server sent a malformed frame: {0}")]
    Frame(FrameError),
    #[error("a response header block cannot be decoded (COMPRESSION_ERROR): {0}")]
    Hpack(HpackError),
    #[error("the server answered in HTTP/1.1")]
    Http1,
    #[error("a malformed response: {0}")]
    Malformed(&'static str),
}

impl From<FrameError> for ConnError {
    fn from(e: FrameError) -> Self {
        ConnError::Frame(e)
    }
}

/// Where the request under way stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// No request, or no whole response yet.
    Pending,
    /// The whole response, with its status.
    Done(u16),
    /// The server did not take the request (REFUSED_STREAM, or a GOAWAY
    /// below its stream): it may go again on a new connection.
    Refused,
    /// The server reset the stream with this error code.
    Reset(u32),
    /// The server ended the connection with this error code.
    GoAway(u32),
}

struct Stream {
    id: u32,
    /// A HEAD request: the response has no body whatever its
    /// content-length says.
    head_request: bool,
    /// The request body still to send, from this offset, and the stream's
    /// send window (the server's SETTINGS_INITIAL_WINDOW_SIZE, then its
    /// WINDOW_UPDATEs).
    body: Option<(Arc<[u8]>, usize)>,
    send_window: i64,
    head: Option<hpack::Head>,
    got: u64,
    unacked: u32,
    ended: bool,
    reset: Option<u32>,
}

/// The rest of a DATA frame that is not in the buffer yet.
#[derive(Default)]
struct Skip {
    data: u32,
    pad: u32,
    stream: u32,
    end: bool,
}

/// What one `process` call found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Body bytes of the request under way.
    pub body: u64,
    /// Its final response header block arrived.
    pub headers: bool,
}

pub struct Session {
    out: Vec<u8>,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    skip: Skip,
    /// A header block waiting for CONTINUATION: (stream, END_STREAM).
    block_for: Option<(u32, bool)>,
    block: Vec<u8>,
    /// The next request's header block, as encoded (kept for its buffer).
    block_out: Vec<u8>,
    hpack: hpack::Decoder,
    encoder: hpack::Encoder,
    peer: PeerSettings,
    next_id: u32,
    stream: Option<Stream>,
    /// The server's GOAWAY: (last stream id, error code).
    goaway: Option<(u32, u32)>,
    conn_unacked: u32,
    seen_frame: bool,
    /// The connection's send window for request bodies.
    send_conn: i64,
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}

impl Session {
    /// A new connection, its preface queued.
    pub fn new() -> Self {
        let mut out = Vec::with_capacity(256);
        frame::put_preface(&mut out);
        Session {
            out,
            buf: vec![0u8; RECV_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            skip: Skip::default(),
            block_for: None,
            block: Vec::new(),
            block_out: Vec::new(),
            hpack: hpack::Decoder::default(),
            encoder: hpack::Encoder::default(),
            peer: PeerSettings {
                max_frame: frame::DEFAULT_MAX_FRAME,
                initial_window: DEFAULT_WINDOW,
                header_table: hpack::TABLE_SIZE as u32,
            },
            next_id: 1,
            stream: None,
            goaway: None,
            conn_unacked: 0,
            seen_frame: false,
            send_conn: i64::from(DEFAULT_WINDOW),
        }
    }

    /// Whether a new request may go on this connection: no GOAWAY, stream
    /// ids left, none under way.
    pub fn can_request(&self) -> bool {
        self.goaway.is_none() && self.next_id <= frame::MAX_WINDOW && self.stream.is_none()
    }

    /// Queues a GET with `block` (encoded, leaving the dynamic table
    /// alone) on a new stream; false when the connection takes no more
    /// requests (see `can_request`).
    pub fn request(&mut self, block: &[u8]) -> bool {
        self.request_with(
            &hpack::RequestBlock::fixed(block),
            &Arc::from(&[][..]),
            false,
        )
    }

    /// Queues a request with `block` and `body` (DATA frames within the
    /// server's flow-control windows, the rest as WINDOW_UPDATEs come);
    /// `head_request`: its response has no body (HEAD).
    pub fn request_with(
        &mut self,
        block: &hpack::RequestBlock,
        body: &Arc<[u8]>,
        head_request: bool,
    ) -> bool {
        if !self.can_request() {
            return false;
        }
        let id = self.next_id;
        self.next_id += 2;
        let end = body.is_empty();
        let mut fields = std::mem::take(&mut self.block_out);
        fields.clear();
        self.encoder.put(block, &mut fields);
        frame::put_headers_then(&mut self.out, id, &fields, self.peer.max_frame, end);
        self.block_out = fields;
        self.stream = Some(Stream {
            id,
            head_request,
            body: (!end).then(|| (Arc::clone(body), 0)),
            send_window: i64::from(self.peer.initial_window),
            head: None,
            got: 0,
            unacked: 0,
            ended: false,
            reset: None,
        });
        self.pump();
        true
    }

    /// Forgets the request under way (answered, or failed).
    pub fn finish(&mut self) {
        self.stream = None;
    }

    /// The final response head of the request under way, once it came.
    pub fn response_head(&self) -> Option<hpack::Head> {
        self.stream.as_ref().and_then(|s| s.head)
    }

    pub fn answer(&self) -> Answer {
        let Some(s) = &self.stream else {
            return Answer::Pending;
        };
        match (s.reset, s.ended, s.head) {
            (Some(frame::REFUSED_STREAM), _, _) => return Answer::Refused,
            (Some(code), _, _) => return Answer::Reset(code),
            (None, true, Some(h)) => return Answer::Done(h.status.unwrap_or(0)),
            _ => {}
        }
        // A GOAWAY with an error fails the request (HTTP_1_1_REQUIRED
        // would only be refused again); a graceful one above its stream
        // leaves it to a new connection.
        match self.goaway {
            Some((_, code)) if code != frame::NO_ERROR => Answer::GoAway(code),
            Some((last, _)) if s.id > last => Answer::Refused,
            _ => Answer::Pending,
        }
    }

    /// The error code of a GOAWAY that was not graceful.
    pub fn goaway_error(&self) -> Option<u32> {
        self.goaway
            .map(|(_, code)| code)
            .filter(|&c| c != frame::NO_ERROR)
    }

    /// Bytes to write to the server.
    pub fn outgoing(&self) -> &[u8] {
        &self.out
    }

    /// `n` bytes of `outgoing` were written.
    pub fn wrote(&mut self, n: usize) {
        self.out.drain(..n.min(self.out.len()));
    }

    /// Room for the next read (what is left of a frame moved to the front).
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were read into `spare`.
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Takes every whole frame (and every DATA byte) read so far.
    pub fn process(&mut self) -> Result<Progress, ConnError> {
        let buf = std::mem::take(&mut self.buf);
        let r = self.frames(&buf);
        self.buf = buf;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        self.refill();
        self.pump();
        r
    }

    /// Queues as much of the request body as the send windows allow, in
    /// DATA frames no larger than the server takes; END_STREAM on the last.
    fn pump(&mut self) {
        let max_frame = i64::from(self.peer.max_frame);
        let Some(s) = self
            .stream
            .as_mut()
            .filter(|s| !s.ended && s.reset.is_none())
        else {
            return;
        };
        let Some((body, at)) = s.body.as_mut() else {
            return;
        };
        while *at < body.len() {
            let room = self.send_conn.min(s.send_window).min(max_frame);
            if room <= 0 {
                return;
            }
            let n = (body.len() - *at).min(room as usize);
            let last = *at + n == body.len();
            let flags = if last { frame::END_STREAM } else { 0 };
            frame::put_head(&mut self.out, n, frame::DATA, flags, s.id);
            self.out.extend_from_slice(&body[*at..*at + n]);
            *at += n;
            self.send_conn -= n as i64;
            s.send_window -= n as i64;
        }
        s.body = None;
    }

    /// The request body is queued whole (or there is none).
    pub fn body_sent(&self) -> bool {
        self.stream.as_ref().is_none_or(|s| s.body.is_none())
    }
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;

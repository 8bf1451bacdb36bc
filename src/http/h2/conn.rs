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

use super::frame::{self, error, FrameError, Head, PeerSettings, HEADER_LEN};
use super::hpack::{self, HpackError};
use std::sync::Arc;

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

    fn frames(&mut self, buf: &[u8]) -> Result<Progress, ConnError> {
        let mut p = Progress::default();
        loop {
            if self.skip.data > 0 || self.skip.pad > 0 {
                if !self.take_data(&mut p)? {
                    return Ok(p);
                }
                continue;
            }
            let have = &buf[self.start..self.end];
            if !self.seen_frame && have.len() >= 7 && have.starts_with(b"HTTP/1.") {
                return Err(ConnError::Http1);
            }
            let Some(hb) = have.first_chunk::<HEADER_LEN>() else {
                return Ok(p);
            };
            let h = Head::parse(hb);
            if h.len > MAX_FRAME {
                return Err(error(frame::FRAME_SIZE_ERROR, "a frame above 16384 bytes").into());
            }
            if self.block_for.is_some() && h.kind != frame::CONTINUATION {
                return Err(
                    error(frame::PROTOCOL_ERROR, "a header block cut by another frame").into(),
                );
            }
            if h.kind == frame::DATA {
                if !self.start_data(&h, have)? {
                    return Ok(p);
                }
                continue;
            }
            let whole = HEADER_LEN + h.len as usize;
            let Some(payload) = have.get(HEADER_LEN..whole) else {
                return Ok(p);
            };
            self.seen_frame = true;
            self.frame(&h, payload, &mut p)?;
            self.start += whole;
        }
    }

    /// A DATA frame's header (and pad length): false until they are here.
    fn start_data(&mut self, h: &Head, have: &[u8]) -> Result<bool, ConnError> {
        if h.stream == 0 {
            return Err(error(frame::PROTOCOL_ERROR, "DATA on stream 0").into());
        }
        let padded = h.has(frame::PADDED);
        let (pad, taken) = match (padded, have.get(HEADER_LEN)) {
            (false, _) => (0, HEADER_LEN),
            (true, Some(&pad)) => (u32::from(pad), HEADER_LEN + 1),
            (true, None) => return Ok(false),
        };
        let data = h.len.checked_sub(u32::from(padded) + pad).ok_or(error(
            frame::PROTOCOL_ERROR,
            "padding longer than the frame",
        ))?;
        self.seen_frame = true;
        self.start += taken;
        self.conn_unacked = self.conn_unacked.saturating_add(h.len);
        if let Some(s) = self.stream.as_mut().filter(|s| s.id == h.stream) {
            s.unacked = s.unacked.saturating_add(h.len);
        }
        self.skip = Skip {
            data,
            pad,
            stream: h.stream,
            end: h.has(frame::END_STREAM),
        };
        if data == 0 && pad == 0 {
            self.end_data()?;
        }
        Ok(true)
    }

    /// Counts the DATA bytes at hand: false when the buffer is used up.
    fn take_data(&mut self, p: &mut Progress) -> Result<bool, ConnError> {
        let avail = (self.end - self.start) as u32;
        if avail == 0 {
            return Ok(false);
        }
        let n = self.skip.data.min(avail);
        if n > 0 {
            self.skip.data -= n;
            self.start += n as usize;
            if let Some(s) = self.stream.as_mut() {
                if s.id == self.skip.stream && s.head.is_some() && !s.ended {
                    s.got += u64::from(n);
                    p.body += u64::from(n);
                }
            }
        }
        let pad = self.skip.pad.min(avail - n);
        self.skip.pad -= pad;
        self.start += pad as usize;
        if self.skip.data == 0 && self.skip.pad == 0 {
            self.end_data()?;
        }
        Ok(true)
    }

    /// A DATA frame is all read: END_STREAM ends the response.
    fn end_data(&mut self) -> Result<(), ConnError> {
        if !self.skip.end {
            return Ok(());
        }
        let id = self.skip.stream;
        self.skip.end = false;
        match self.stream.as_mut() {
            Some(s) if s.id == id && !s.ended => {
                if s.head.is_none() {
                    return Err(ConnError::Malformed("a body before the response head"));
                }
                end_stream_of(s)
            }
            _ => Ok(()),
        }
    }

    /// A SETTINGS frame: the peer's settings applied (the open stream's
    /// window moved by the new initial window) and acknowledged, or its ACK
    /// of ours.
    fn settings(&mut self, h: &Head, payload: &[u8]) -> Result<(), ConnError> {
        if h.has(frame::ACK) {
            if !payload.is_empty() {
                return Err(error(frame::FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload").into());
            }
        } else {
            let before = self.peer.initial_window;
            frame::apply_settings(&mut self.peer, payload)?;
            self.encoder.peer_table_size(self.peer.header_table);
            // A new initial window moves the open stream's by the difference.
            if let Some(s) = self.stream.as_mut() {
                s.send_window += i64::from(self.peer.initial_window) - i64::from(before);
            }
            frame::put_head(&mut self.out, 0, frame::SETTINGS, frame::ACK, 0);
        }
        Ok(())
    }

    /// A WINDOW_UPDATE frame: more room to send on the connection or on
    /// the open stream.
    fn window_update(&mut self, h: &Head, payload: &[u8]) -> Result<(), ConnError> {
        let inc = i64::from(frame::word(payload, "WINDOW_UPDATE not 4 bytes")? & frame::MAX_WINDOW);
        if h.stream == 0 {
            self.send_conn += inc;
        } else if let Some(s) = self.stream.as_mut().filter(|s| s.id == h.stream) {
            s.send_window += inc;
        }
        if self.send_conn > i64::from(frame::MAX_WINDOW) {
            return Err(error(frame::FLOW_CONTROL_ERROR, "a send window above 2^31-1").into());
        }
        Ok(())
    }

    /// Any frame but DATA, whole.
    fn frame(&mut self, h: &Head, payload: &[u8], p: &mut Progress) -> Result<(), ConnError> {
        let on_zero = |what: &'static str| -> Result<(), ConnError> {
            match h.stream {
                0 => Ok(()),
                _ => Err(error(frame::PROTOCOL_ERROR, what).into()),
            }
        };
        match h.kind {
            frame::HEADERS => {
                if h.stream == 0 {
                    return Err(error(frame::PROTOCOL_ERROR, "HEADERS on stream 0").into());
                }
                let fragment = frame::headers_fragment(h, payload)?;
                self.block.clear();
                self.fragment(h.stream, h.has(frame::END_STREAM), fragment, h, p)?;
            }
            frame::CONTINUATION => match self.block_for {
                Some((id, end)) if id == h.stream => self.fragment(id, end, payload, h, p)?,
                _ => return Err(error(frame::PROTOCOL_ERROR, "CONTINUATION out of place").into()),
            },
            frame::RST_STREAM => {
                if h.stream == 0 {
                    return Err(error(frame::PROTOCOL_ERROR, "RST_STREAM on stream 0").into());
                }
                let code = frame::word(payload, "RST_STREAM not 4 bytes")?;
                if let Some(s) = self
                    .stream
                    .as_mut()
                    .filter(|s| s.id == h.stream && !s.ended)
                {
                    s.reset = Some(code);
                }
            }
            frame::SETTINGS => {
                on_zero("SETTINGS on a stream")?;
                self.settings(h, payload)?;
            }
            frame::PING => {
                on_zero("PING on a stream")?;
                if payload.len() != 8 {
                    return Err(error(frame::FRAME_SIZE_ERROR, "PING not 8 bytes").into());
                }
                if !h.has(frame::ACK) {
                    frame::put_head(&mut self.out, 8, frame::PING, frame::ACK, 0);
                    self.out.extend_from_slice(payload);
                }
            }
            frame::GOAWAY => {
                on_zero("GOAWAY on a stream")?;
                let (last, code) = frame::goaway(payload)?;
                // A later GOAWAY may only lower the last stream id.
                let last = self.goaway.map_or(last, |(l, _)| l.min(last));
                self.goaway = Some((last, code));
            }
            frame::WINDOW_UPDATE => {
                self.window_update(h, payload)?;
            }
            frame::PRIORITY if payload.len() != 5 => {
                return Err(error(frame::FRAME_SIZE_ERROR, "PRIORITY not 5 bytes").into());
            }
            frame::PUSH_PROMISE => {
                return Err(error(frame::PROTOCOL_ERROR, "PUSH_PROMISE with push disabled").into());
            }
            // PRIORITY and unknown frame types are ignored.
            _ => {}
        }
        Ok(())
    }

    /// A piece of a header block: decoded once the block is whole.
    fn fragment(
        &mut self,
        id: u32,
        end_stream: bool,
        fragment: &[u8],
        h: &Head,
        p: &mut Progress,
    ) -> Result<(), ConnError> {
        let head = if h.has(frame::END_HEADERS) && self.block.is_empty() {
            // The usual case, one frame: decoded where it lies.
            self.block_for = None;
            self.hpack.head(fragment)
        } else {
            if self.block.len() + fragment.len() > MAX_BLOCK {
                return Err(error(frame::PROTOCOL_ERROR, "a header block above 1 MiB").into());
            }
            self.block.extend_from_slice(fragment);
            if !h.has(frame::END_HEADERS) {
                self.block_for = Some((id, end_stream));
                return Ok(());
            }
            self.block_for = None;
            let block = std::mem::take(&mut self.block);
            let r = self.hpack.head(&block);
            self.block = block;
            self.block.clear();
            r
        }
        .map_err(ConnError::Hpack)?;
        let Some(s) = self.stream.as_mut().filter(|s| s.id == id && !s.ended) else {
            return Ok(());
        };
        if s.head.is_none() {
            match head.status {
                None => return Err(ConnError::Malformed("a response without :status")),
                // An interim response (100, 103): the final one follows.
                Some(st) if st < 200 => {
                    if end_stream {
                        return Err(ConnError::Malformed("an interim response ends the stream"));
                    }
                    return Ok(());
                }
                Some(_) => {
                    s.head = Some(head);
                    p.headers = true;
                }
            }
        }
        if end_stream {
            end_stream_of(s)?;
        }
        Ok(())
    }

    /// Gives the windows back once enough of them was used.
    fn refill(&mut self) {
        if self.conn_unacked >= REFILL {
            frame::put_window_update(&mut self.out, 0, self.conn_unacked);
            self.conn_unacked = 0;
        }
        if let Some(s) = self
            .stream
            .as_mut()
            .filter(|s| !s.ended && s.unacked >= REFILL)
        {
            frame::put_window_update(&mut self.out, s.id, s.unacked);
            s.unacked = 0;
        }
    }
}

/// The response is whole: its body must be as long as it said.
fn end_stream_of(s: &mut Stream) -> Result<(), ConnError> {
    s.ended = true;
    // A HEAD response's content-length is the GET's; 204 and 304 have none.
    let bodiless = s.head_request
        || s.head
            .and_then(|h| h.status)
            .is_some_and(|c| c == 204 || c == 304);
    match s.head.and_then(|h| h.content_length).filter(|_| !bodiless) {
        Some(n) if n != s.got => Err(ConnError::Malformed(
            "a body not as long as its content-length",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;

//! The frames a server sends, read into a [`Session`]: DATA counted where it
//! lies in the buffer, header blocks across CONTINUATION, SETTINGS,
//! WINDOW_UPDATE, PING, RST_STREAM and GOAWAY, and the windows given back.

use super::{ConnError, Progress, Session, Skip, Stream, MAX_BLOCK, MAX_FRAME, REFILL};
use crate::http::h2::frame::{self, error, Head, HEADER_LEN};

impl Session {
    pub(super) fn frames(&mut self, buf: &[u8]) -> Result<Progress, ConnError> {
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
    pub(super) fn refill(&mut self) {
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

//! HTTP/2 frames (RFC 9113, section 4 and 6): the 9-byte frame header,
//! the payloads a client reads (padding, SETTINGS, GOAWAY, RST_STREAM),
//! and the few frames it writes. No I/O and no connection state.

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE's default and least value.
pub const DEFAULT_MAX_FRAME: u32 = 16_384;
const LARGEST_MAX_FRAME: u32 = (1 << 24) - 1;
/// The largest flow-control window (2^31 - 1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;

/// Error codes (RFC 9113, section 7).
pub const NO_ERROR: u32 = 0x0;
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const REFUSED_STREAM: u32 = 0x7;
pub const HTTP_1_1_REQUIRED: u32 = 0xd;

/// An error code's name, as the RFC spells it.
pub fn code_name(code: u32) -> String {
    let name = match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => return format!("error code {code:#x}"),
    };
    name.to_string()
}

/// A frame's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Head {
    pub fn parse(b: &[u8; HEADER_LEN]) -> Head {
        Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            // The reserved bit is ignored on receipt.
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_WINDOW,
        }
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// A malformed frame: a connection error with its code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} ({})", code_name(*.code))]
pub struct FrameError {
    pub code: u32,
    pub what: &'static str,
}

pub fn error(code: u32, what: &'static str) -> FrameError {
    FrameError { code, what }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A padded payload's content, without the pad length and padding.
pub fn unpad<'a>(h: &Head, p: &'a [u8]) -> Result<&'a [u8], FrameError> {
    if !h.has(PADDED) {
        return Ok(p);
    }
    let (&pad, rest) = p.split_first().ok_or(error(
        FRAME_SIZE_ERROR,
        "a padded frame without its pad length",
    ))?;
    rest.len()
        .checked_sub(usize::from(pad))
        .map(|n| &rest[..n])
        .ok_or(error(PROTOCOL_ERROR, "padding longer than the frame"))
}

/// A HEADERS payload's header block fragment.
pub fn headers_fragment<'a>(h: &Head, p: &'a [u8]) -> Result<&'a [u8], FrameError> {
    let p = unpad(h, p)?;
    if !h.has(PRIORITY_FLAG) {
        return Ok(p);
    }
    p.get(5..).ok_or(error(
        FRAME_SIZE_ERROR,
        "HEADERS too short for its priority",
    ))
}

/// The settings a client honours from its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerSettings {
    pub max_frame: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: each new stream's send window (a
    /// request body's DATA frames stay within it).
    pub initial_window: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: the dynamic table the server keeps for
    /// the client's header blocks.
    pub header_table: u32,
}

/// Applies a SETTINGS payload (not an ACK) to `s`.
pub fn apply_settings(s: &mut PeerSettings, p: &[u8]) -> Result<(), FrameError> {
    if p.len() % 6 != 0 {
        return Err(error(
            FRAME_SIZE_ERROR,
            "SETTINGS not a multiple of 6 bytes",
        ));
    }
    for e in p.chunks_exact(6) {
        let id = u16::from_be_bytes([e[0], e[1]]);
        let v = be32(&e[2..]);
        match id {
            SETTINGS_ENABLE_PUSH if v > 1 => {
                return Err(error(PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH above 1"))
            }
            SETTINGS_INITIAL_WINDOW_SIZE if v > MAX_WINDOW => {
                return Err(error(
                    FLOW_CONTROL_ERROR,
                    "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                ))
            }
            SETTINGS_INITIAL_WINDOW_SIZE => s.initial_window = v,
            SETTINGS_MAX_FRAME_SIZE => {
                if !(DEFAULT_MAX_FRAME..=LARGEST_MAX_FRAME).contains(&v) {
                    return Err(error(
                        PROTOCOL_ERROR,
                        "SETTINGS_MAX_FRAME_SIZE out of range",
                    ));
                }
                s.max_frame = v;
            }
            SETTINGS_HEADER_TABLE_SIZE => s.header_table = v,
            // The rest concern what a client does not do (push, sending
            // bodies).
            _ => {}
        }
    }
    Ok(())
}

/// A GOAWAY payload: (last stream id, error code).
pub fn goaway(p: &[u8]) -> Result<(u32, u32), FrameError> {
    if p.len() < 8 {
        return Err(error(FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes"));
    }
    Ok((be32(p) & MAX_WINDOW, be32(&p[4..])))
}

/// A frame whose payload is one 32-bit value (RST_STREAM, WINDOW_UPDATE).
pub fn word(p: &[u8], what: &'static str) -> Result<u32, FrameError> {
    if p.len() != 4 {
        return Err(error(FRAME_SIZE_ERROR, what));
    }
    Ok(be32(p))
}

pub fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = len as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// The client's preface: the magic, SETTINGS (no push, the largest stream
/// window) and a WINDOW_UPDATE that opens the connection's window fully.
pub fn put_preface(out: &mut Vec<u8>) {
    out.extend_from_slice(PREFACE);
    put_head(out, 12, SETTINGS, 0, 0);
    for (id, v) in [
        (SETTINGS_ENABLE_PUSH, 0),
        (SETTINGS_INITIAL_WINDOW_SIZE, MAX_WINDOW),
    ] {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
    put_window_update(out, 0, MAX_WINDOW - 65_535);
}

pub fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    put_head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// A request's header block as HEADERS (END_STREAM: a GET has no body)
/// and as many CONTINUATIONs as the peer's frame size asks for.
pub fn put_headers(out: &mut Vec<u8>, stream: u32, block: &[u8], max_frame: u32) {
    put_headers_then(out, stream, block, max_frame, true);
}

/// As [`put_headers`]; `end_stream` false when DATA frames (a body) follow.
pub fn put_headers_then(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    max_frame: u32,
    end_stream: bool,
) {
    let max = max_frame.max(DEFAULT_MAX_FRAME) as usize;
    let mut parts = block.chunks(max).peekable();
    let mut kind = HEADERS;
    let mut flags = if end_stream { END_STREAM } else { 0 };
    if parts.peek().is_none() {
        put_head(out, 0, HEADERS, flags | END_HEADERS, stream);
        return;
    }
    while let Some(part) = parts.next() {
        let last = parts.peek().is_none();
        put_head(
            out,
            part.len(),
            kind,
            flags | if last { END_HEADERS } else { 0 },
            stream,
        );
        out.extend_from_slice(part);
        kind = CONTINUATION;
        flags = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(b: &[u8]) -> Head {
        Head::parse(b.try_into().unwrap())
    }

    #[test]
    fn h2_frame_head_round_trips_and_ignores_the_reserved_bit() {
        let mut out = Vec::new();
        put_head(&mut out, 0x01_2345, HEADERS, END_HEADERS, 0x8000_0007);
        let h = head(&out);
        assert_eq!(
            h,
            Head {
                len: 0x01_2345,
                kind: HEADERS,
                flags: END_HEADERS,
                stream: 7
            }
        );
        assert!(h.has(END_HEADERS) && !h.has(END_STREAM));
    }

    #[test]
    fn h2_padding_and_priority_are_stripped() {
        let h = Head {
            len: 0,
            kind: DATA,
            flags: PADDED,
            stream: 1,
        };
        assert_eq!(unpad(&h, &[2, b'a', b'b', 0, 0]), Ok(&b"ab"[..]));
        assert_eq!(unpad(&h, &[0]), Ok(&b""[..]));
        assert_eq!(unpad(&h, &[3, 0, 0]).unwrap_err().code, PROTOCOL_ERROR);
        assert_eq!(unpad(&h, &[]).unwrap_err().code, FRAME_SIZE_ERROR);
        let hp = Head {
            flags: PADDED | PRIORITY_FLAG,
            kind: HEADERS,
            ..h
        };
        assert_eq!(
            headers_fragment(&hp, &[1, 0, 0, 0, 3, 16, 0x88, 0]),
            Ok(&[0x88][..])
        );
        assert_eq!(
            headers_fragment(&hp, &[0, 1]).unwrap_err().code,
            FRAME_SIZE_ERROR
        );
    }

    #[test]
    fn h2_settings_are_checked() {
        let mut s = PeerSettings {
            max_frame: DEFAULT_MAX_FRAME,
            initial_window: 65_535,
            header_table: 4096,
        };
        let mut p = Vec::new();
        p.extend_from_slice(&SETTINGS_MAX_FRAME_SIZE.to_be_bytes());
        p.extend_from_slice(&65_536u32.to_be_bytes());
        p.extend_from_slice(&SETTINGS_HEADER_TABLE_SIZE.to_be_bytes());
        p.extend_from_slice(&0u32.to_be_bytes());
        apply_settings(&mut s, &p).unwrap();
        assert_eq!(s.max_frame, 65_536);
        assert_eq!(s.header_table, 0);
        assert_eq!(
            apply_settings(&mut s, &p[..5]).unwrap_err().code,
            FRAME_SIZE_ERROR
        );
        let bad = [0, 5, 0, 0, 0, 1];
        assert_eq!(
            apply_settings(&mut s, &bad).unwrap_err().code,
            PROTOCOL_ERROR
        );
        let bad = [0, 4, 0x80, 0, 0, 0];
        assert_eq!(
            apply_settings(&mut s, &bad).unwrap_err().code,
            FLOW_CONTROL_ERROR
        );
        assert_eq!(
            goaway(&[0x80, 0, 0, 5, 0, 0, 0, 0xd]),
            Ok((5, HTTP_1_1_REQUIRED))
        );
        assert!(goaway(&[0; 7]).is_err());
        assert!(word(&[0; 5], "RST_STREAM").is_err());
    }

    #[test]
    fn h2_headers_split_into_continuations() {
        let block = vec![0x82u8; 40_000];
        let mut out = Vec::new();
        put_headers(&mut out, 3, &block, DEFAULT_MAX_FRAME);
        let h1 = head(&out[..9]);
        assert_eq!((h1.kind, h1.flags, h1.len), (HEADERS, END_STREAM, 16_384));
        let at = 9 + 16_384;
        let h2 = head(&out[at..at + 9]);
        assert_eq!((h2.kind, h2.flags), (CONTINUATION, 0));
        let at = at + 9 + 16_384;
        let h3 = head(&out[at..at + 9]);
        assert_eq!(
            (h3.kind, h3.flags, h3.len),
            (CONTINUATION, END_HEADERS, 40_000 - 32_768)
        );
        let mut small = Vec::new();
        put_headers(&mut small, 1, &[0x82], DEFAULT_MAX_FRAME);
        assert_eq!(head(&small[..9]).flags, END_STREAM | END_HEADERS);
    }
}

//! The chunked transfer coding (RFC 9112 section 7.1) as one decoder both
//! HTTP/1.1 sides use: `serve` reading a request body, the client reading
//! a response body. No I/O and no buffer: bytes go in in whatever pieces
//! the socket gave, the decoder keeps its place between them, and the
//! chunk data is only counted (both sides discard it; a caller may drop a
//! chunk's data without showing it, `skip`, as the client does in the
//! kernel). Chunk extensions and trailer fields are checked for framing
//! and dropped.
//!
//! ```text
//! chunked-body = *chunk last-chunk trailer-section CRLF
//! chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! last-chunk   = 1*("0") [ chunk-ext ] CRLF
//! ```

use super::wire::MAX_HEAD;
use std::fmt;

/// The most hex digits of a chunk size: 16 fill a u64.
pub const MAX_SIZE_DIGITS: u32 = 16;
/// The longest chunk-size line (size and extensions) and the largest
/// trailer section: the head's cap, since both are header-like text.
pub const MAX_LINE: usize = MAX_HEAD;

/// Why a chunked body is refused. Each one ends the message: its end is
/// unknown, so the connection goes too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkError {
    /// A chunk-size line that does not start with a hex number.
    BadSize,
    /// A chunk size of more than [`MAX_SIZE_DIGITS`] hex digits.
    SizeTooLong,
    /// The chunks add up past 2^64 - 1 bytes.
    Overflow,
    /// The chunks add up past the reader's limit (the server's body cap).
    TooLarge { limit: u64 },
    /// A line (size line, chunk data, trailer field) not ended by CRLF.
    BadLineEnd,
    /// A control character in a chunk extension.
    BadExtension,
    /// A chunk-size line over [`MAX_LINE`] bytes.
    LineTooLong,
    /// A trailer line that is not `name: value`.
    BadTrailer,
    /// A trailer section over [`MAX_LINE`] bytes.
    TrailerTooLarge,
}

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChunkError::BadSize => write!(f, "a chunk size that is not a hex number"),
            ChunkError::SizeTooLong => {
                write!(f, "a chunk size of more than {MAX_SIZE_DIGITS} hex digits")
            }
            ChunkError::Overflow => write!(f, "chunks that add up past 2^64 bytes"),
            ChunkError::TooLarge { limit } => write!(f, "chunks that add up past {limit} bytes"),
            ChunkError::BadLineEnd => write!(f, "a line not ended by CRLF"),
            ChunkError::BadExtension => write!(f, "a control character in a chunk extension"),
            ChunkError::LineTooLong => write!(f, "a chunk-size line over {MAX_LINE} bytes"),
            ChunkError::BadTrailer => write!(f, "a trailer line that is not 'name: value'"),
            ChunkError::TrailerTooLarge => write!(f, "a trailer section over {MAX_LINE} bytes"),
        }
    }
}

impl std::error::Error for ChunkError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Hex digits of a chunk size.
    Size {
        value: u64,
        digits: u32,
    },
    /// Whitespace after the size (before `;` or CR).
    SizeSpace {
        value: u64,
    },
    /// Inside the chunk extensions, up to CR.
    Ext {
        value: u64,
    },
    /// The size line's CR is in; its LF next.
    SizeLf {
        value: u64,
    },
    Data {
        left: u64,
    },
    DataCr,
    DataLf,
    /// At the start of a trailer field line, or of the final CRLF.
    TrailerStart,
    /// In a trailer field's name (`colon` false) or value.
    TrailerLine {
        colon: bool,
    },
    TrailerLf,
    EndLf,
    Done,
    Failed(ChunkError),
}

/// What one [`Decoder::feed`] took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fed {
    /// Input bytes consumed: all of them, unless the body ended first.
    pub used: usize,
    /// Of them, chunk data (the decoded body).
    pub body: u64,
}

/// A chunked body's decoder, from the first chunk-size line to the CRLF
/// after the trailers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoder {
    state: State,
    body: u64,
    limit: u64,
    /// Bytes of the current size line, or of the trailer section so far.
    line: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

fn hex(b: u8) -> Option<u64> {
    match b {
        b'0'..=b'9' => Some(u64::from(b - b'0')),
        b'a'..=b'f' => Some(u64::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u64::from(b - b'A' + 10)),
        _ => None,
    }
}

/// A token character (RFC 9110 5.6.2): a trailer field's name.
fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Text allowed in an extension or a field value: no control characters
/// but HTAB (CR and LF end the line; a bare one is refused).
fn text(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7f)
}

/// A byte of a chunk-size line before its CR: hex digits, then optional
/// spaces and an extension.
fn size_line_byte(state: State, b: u8) -> Result<State, ChunkError> {
    Ok(match state {
        State::Size { value, digits } => match (hex(b), b) {
            (Some(d), _) if digits < MAX_SIZE_DIGITS => State::Size {
                value: value << 4 | d,
                digits: digits + 1,
            },
            (Some(_), _) => return Err(ChunkError::SizeTooLong),
            (None, _) if digits == 0 => return Err(ChunkError::BadSize),
            (None, b' ' | b'\t') => State::SizeSpace { value },
            (None, b';') => State::Ext { value },
            (None, b'\r') => State::SizeLf { value },
            (None, b'\n') => return Err(ChunkError::BadLineEnd),
            (None, _) => return Err(ChunkError::BadSize),
        },
        State::SizeSpace { value } => match b {
            b' ' | b'\t' => State::SizeSpace { value },
            b';' => State::Ext { value },
            b'\r' => State::SizeLf { value },
            b'\n' => return Err(ChunkError::BadLineEnd),
            _ => return Err(ChunkError::BadSize),
        },
        State::Ext { value } => match b {
            b'\r' => State::SizeLf { value },
            b'\n' => return Err(ChunkError::BadLineEnd),
            b if text(b) => State::Ext { value },
            _ => return Err(ChunkError::BadExtension),
        },
        s => s,
    })
}

/// A byte of a trailer line (or of the blank line that ends them) before
/// its CR.
fn trailer_byte(state: State, b: u8) -> Result<State, ChunkError> {
    Ok(match state {
        State::TrailerStart => match b {
            b'\r' => State::EndLf,
            b'\n' => return Err(ChunkError::BadLineEnd),
            b if tchar(b) => State::TrailerLine { colon: false },
            _ => return Err(ChunkError::BadTrailer),
        },
        State::TrailerLine { colon: false } => match b {
            b':' => State::TrailerLine { colon: true },
            b if tchar(b) => State::TrailerLine { colon: false },
            _ => return Err(ChunkError::BadTrailer),
        },
        State::TrailerLine { colon: true } => match b {
            b'\r' => State::TrailerLf,
            b'\n' => return Err(ChunkError::BadLineEnd),
            b if text(b) => State::TrailerLine { colon: true },
            _ => return Err(ChunkError::BadTrailer),
        },
        s => s,
    })
}

impl Decoder {
    /// A decoder without a limit but u64's.
    pub fn new() -> Self {
        Decoder::with_limit(u64::MAX)
    }

    /// A decoder that refuses a body of more than `limit` data bytes as
    /// soon as a chunk size says it would be.
    pub fn with_limit(limit: u64) -> Self {
        Decoder {
            state: State::Size {
                value: 0,
                digits: 0,
            },
            body: 0,
            limit,
            line: 0,
        }
    }

    /// The whole body is in (trailers and the final CRLF included).
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Data bytes decoded so far.
    pub fn body_bytes(&self) -> u64 {
        self.body
    }

    /// Data bytes left in the current chunk: the next that many input
    /// bytes are data, which a caller may drop unseen and [`skip`](Self::skip).
    pub fn data_left(&self) -> u64 {
        match self.state {
            State::Data { left } => left,
            _ => 0,
        }
    }

    /// Takes `n` data bytes the caller read and dropped itself; at most
    /// [`data_left`](Self::data_left) count. Returns how many did.
    pub fn skip(&mut self, n: u64) -> u64 {
        let State::Data { left } = self.state else {
            return 0;
        };
        let n = n.min(left);
        self.body += n;
        self.state = if n == left {
            State::DataCr
        } else {
            State::Data { left: left - n }
        };
        n
    }

    /// Decodes `input`, the bytes that follow what came before. Every
    /// byte is used unless the body ends inside `input`; what is left
    /// then is the next message's. An error is final: it comes back on
    /// every later call.
    pub fn feed(&mut self, input: &[u8]) -> Result<Fed, ChunkError> {
        let mut at = 0;
        let mut body = 0u64;
        while at < input.len() {
            match self.state {
                State::Done => break,
                State::Failed(e) => return Err(e),
                State::Data { left } => {
                    let n = left.min((input.len() - at) as u64);
                    self.skip(n);
                    at += n as usize;
                    body += n;
                }
                _ => {
                    if let Err(e) = self.step(input[at]) {
                        self.state = State::Failed(e);
                        return Err(e);
                    }
                    at += 1;
                }
            }
        }
        if let State::Failed(e) = self.state {
            return Err(e);
        }
        Ok(Fed { used: at, body })
    }

    /// One byte of framing (everything but chunk data).
    fn step(&mut self, b: u8) -> Result<(), ChunkError> {
        let size_line = matches!(
            self.state,
            State::Size { .. } | State::SizeSpace { .. } | State::Ext { .. } | State::SizeLf { .. }
        );
        self.line += 1;
        if size_line && self.line > MAX_LINE {
            return Err(ChunkError::LineTooLong);
        }
        if !size_line && self.line > MAX_LINE {
            return Err(ChunkError::TrailerTooLarge);
        }
        self.state = match self.state {
            State::Size { .. } | State::SizeSpace { .. } | State::Ext { .. } => {
                size_line_byte(self.state, b)?
            }
            State::SizeLf { value } => {
                if b != b'\n' {
                    return Err(ChunkError::BadLineEnd);
                }
                self.line = 0;
                if value == 0 {
                    State::TrailerStart
                } else {
                    let total = self.body.checked_add(value).ok_or(ChunkError::Overflow)?;
                    if total > self.limit {
                        return Err(ChunkError::TooLarge { limit: self.limit });
                    }
                    State::Data { left: value }
                }
            }
            State::DataCr if b == b'\r' => State::DataLf,
            State::DataLf if b == b'\n' => {
                self.line = 0;
                State::Size {
                    value: 0,
                    digits: 0,
                }
            }
            State::DataCr | State::DataLf => return Err(ChunkError::BadLineEnd),
            State::TrailerStart | State::TrailerLine { .. } => trailer_byte(self.state, b)?,
            State::TrailerLf if b == b'\n' => State::TrailerStart,
            State::EndLf if b == b'\n' => State::Done,
            State::TrailerLf | State::EndLf => return Err(ChunkError::BadLineEnd),
            // Data, Done and Failed never reach a byte step.
            s @ (State::Data { .. } | State::Done | State::Failed(_)) => s,
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` one piece after another, with the data bytes
    /// (found byte by byte) when `pieces` is 1.
    fn decode_in(input: &[u8], piece: usize) -> (Result<Fed, ChunkError>, bool) {
        let mut d = Decoder::new();
        let mut total = Fed::default();
        for p in input.chunks(piece.max(1)) {
            match d.feed(p) {
                Ok(f) => {
                    total.used += f.used;
                    total.body += f.body;
                    if f.used < p.len() {
                        break;
                    }
                }
                Err(e) => return (Err(e), d.is_done()),
            }
        }
        (Ok(total), d.is_done())
    }

    /// The data bytes of a chunked body, found one byte at a time.
    fn data_of(input: &[u8]) -> Vec<u8> {
        let mut d = Decoder::new();
        let mut out = Vec::new();
        for &b in input {
            let f = d.feed(&[b]).unwrap();
            if f.body == 1 {
                out.push(b);
            }
        }
        assert!(d.is_done());
        out
    }

    fn encode(chunks: &[&[u8]], ext: &str, trailers: &str) -> Vec<u8> {
        let mut v = Vec::new();
        for c in chunks {
            v.extend_from_slice(format!("{:x}{ext}\r\n", c.len()).as_bytes());
            v.extend_from_slice(c);
            v.extend_from_slice(b"\r\n");
        }
        v.extend_from_slice(format!("0{ext}\r\n{trailers}\r\n").as_bytes());
        v
    }

    #[test]
    fn every_split_decodes_the_same() {
        let data: Vec<u8> = (0..300u32).map(|i| (i % 251) as u8).collect();
        let body = encode(
            &[&data[..1], &data[1..17], &data[17..300]],
            ";name=value;q=\"a b\"",
            "Expires: never\r\nX-Sum: 1\r\n",
        );
        let whole = decode_in(&body, body.len());
        assert_eq!(
            whole,
            (
                Ok(Fed {
                    used: body.len(),
                    body: 300
                }),
                true
            )
        );
        for piece in 1..body.len() {
            assert_eq!(decode_in(&body, piece), whole, "pieces of {piece}");
        }
        // Cut in two at every byte.
        for cut in 0..=body.len() {
            let mut d = Decoder::new();
            let a = d.feed(&body[..cut]).unwrap();
            let b = d.feed(&body[cut..]).unwrap();
            assert_eq!((a.used + b.used, a.body + b.body), (body.len(), 300));
            assert!(d.is_done());
        }
        assert_eq!(data_of(&body), data);
    }

    #[test]
    fn the_next_message_is_left_alone() {
        let mut body = encode(&[b"hello"], "", "");
        let end = body.len();
        body.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let mut d = Decoder::new();
        assert_eq!(d.feed(&body), Ok(Fed { used: end, body: 5 }));
        assert!(d.is_done());
        assert_eq!(d.feed(b"more"), Ok(Fed { used: 0, body: 0 }));
    }

    #[test]
    fn zero_length_bodies_and_leading_zeros() {
        for body in [&b"0\r\n\r\n"[..], b"000\r\n\r\n", b"0;x=1\r\nA: b\r\n\r\n"] {
            let mut d = Decoder::new();
            assert_eq!(
                d.feed(body),
                Ok(Fed {
                    used: body.len(),
                    body: 0
                })
            );
            assert!(d.is_done());
        }
        let mut d = Decoder::new();
        assert_eq!(d.feed(b"0005 \t;a\r\nhello\r\n").map(|f| f.body), Ok(5));
        assert!(!d.is_done());
        assert_eq!(data_of(b"A\r\n0123456789\r\n0\r\n\r\n"), b"0123456789");
    }

    #[test]
    fn skipped_data_counts_as_read() {
        let body = encode(&[&[7u8; 1000], &[8u8; 10]], "", "");
        let mut d = Decoder::new();
        assert_eq!(d.feed(&body[..10]).map(|f| f.body), Ok(5)); // "3e8\r\n" + 5
        assert_eq!(d.data_left(), 995);
        assert_eq!(d.skip(2000), 995);
        assert_eq!(d.data_left(), 0);
        assert_eq!(d.skip(1), 0, "no data is due: the CRLF is");
        let rest = d.feed(&body[1005..]).unwrap();
        assert_eq!((rest.used, rest.body), (body.len() - 1005, 10));
        assert!(d.is_done());
        assert_eq!(d.body_bytes(), 1010);
    }

    fn refused(input: &[u8]) -> ChunkError {
        let mut d = Decoder::new();
        let e = d.feed(input).expect_err("accepted");
        // The error is final, and the same split byte by byte.
        assert_eq!(d.feed(b"0\r\n\r\n"), Err(e));
        let mut d = Decoder::new();
        let split = input.iter().find_map(|&b| d.feed(&[b]).err());
        assert_eq!(split, Some(e), "byte by byte");
        e
    }

    #[test]
    fn malformed_chunking_is_refused() {
        use ChunkError::*;
        assert_eq!(refused(b"\r\n"), BadSize);
        assert_eq!(refused(b"g\r\n"), BadSize);
        assert_eq!(refused(b"-1\r\n"), BadSize);
        assert_eq!(refused(b"0x5\r\n"), BadSize);
        assert_eq!(refused(b"5 5\r\n"), BadSize);
        assert_eq!(refused(b" 5\r\n"), BadSize);
        // 16 digits fit, 17 (even of zeros) do not.
        let mut d = Decoder::new();
        assert!(d.feed(b"fffffffffffffff0\r\n").is_ok());
        assert_eq!(d.data_left(), u64::MAX - 15);
        assert_eq!(refused(b"00000000000000005\r\n"), SizeTooLong);
        assert_eq!(refused(b"10000000000000000\r\n"), SizeTooLong);
        // The sum overflows.
        let mut d = Decoder::new();
        d.feed(b"ffffffffffffffff\r\n").unwrap();
        d.skip(u64::MAX);
        assert_eq!(d.feed(b"\r\n1\r\n"), Err(Overflow));
        // Missing or bare line ends.
        assert_eq!(refused(b"5\n"), BadLineEnd);
        assert_eq!(refused(b"5\rx"), BadLineEnd);
        assert_eq!(refused(b"5;a\n"), BadLineEnd);
        assert_eq!(refused(b"3\r\nabcX"), BadLineEnd);
        assert_eq!(refused(b"3\r\nabc\rX"), BadLineEnd);
        assert_eq!(refused(b"3\r\nabc\n"), BadLineEnd);
        assert_eq!(refused(b"0\r\nA: b\n"), BadLineEnd);
        assert_eq!(refused(b"0\r\n\rX"), BadLineEnd);
        assert_eq!(refused(b"0\r\n\n"), BadLineEnd);
        // Extensions and trailers.
        assert_eq!(refused(b"5;a\x00\r\n"), BadExtension);
        assert_eq!(refused(b"0\r\n: b\r\n"), BadTrailer);
        assert_eq!(refused(b"0\r\n b\r\n"), BadTrailer);
        assert_eq!(refused(b"0\r\nA b\r\n"), BadTrailer);
        assert_eq!(refused(b"0\r\nA: \x01\r\n"), BadTrailer);
        let long = format!("5;{}\r\n", "e".repeat(MAX_LINE));
        assert_eq!(refused(long.as_bytes()), LineTooLong);
        let big = format!("0\r\nX: {}\r\n\r\n", "v".repeat(MAX_LINE));
        assert_eq!(refused(big.as_bytes()), TrailerTooLarge);
        // Many small trailer fields count together.
        let many = format!("0\r\n{}\r\n", "X: y\r\n".repeat(MAX_LINE / 6 + 1));
        assert_eq!(refused(many.as_bytes()), TrailerTooLarge);
        let fits = format!("0\r\n{}\r\n", "X: y\r\n".repeat(MAX_LINE / 6 - 1));
        assert!(decode_in(fits.as_bytes(), 7).1);
    }

    #[test]
    fn a_limit_refuses_at_the_size_line() {
        let mut d = Decoder::with_limit(10);
        assert!(d.feed(b"6\r\nabcdef\r\n4\r\nabcd\r\n").is_ok());
        assert_eq!(d.feed(b"1\r\n"), Err(ChunkError::TooLarge { limit: 10 }));
        let mut d = Decoder::with_limit(10);
        assert!(d.feed(b"a\r\n0123456789\r\n0\r\n\r\n").is_ok());
        assert!(d.is_done());
        assert!(ChunkError::TooLarge { limit: 10 }
            .to_string()
            .contains("10 bytes"));
    }
}

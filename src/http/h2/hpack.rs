//! HPACK (RFC 7541) for a client that only needs a response's `:status`
//! and `content-length`: the request's header block, built once (static
//! table indexes and literals without indexing, so it never depends on
//! the peer's table), and a decoder that keeps the dynamic table of any
//! conforming server (incremental indexing, size updates) but decodes
//! only the values it needs; other values are skipped unless they enter
//! the table.
//!
//! `Decoder::head` reuses the previous block's result when a block is
//! byte-identical to it, that block left the dynamic table alone and the
//! table has not changed since: nginx sends the same Huffman literals
//! without indexing in every response, and decoding them was most of a
//! request's cost.

use super::huffman::{self, HuffmanError};
use std::collections::VecDeque;

/// The dynamic table size the client allows (SETTINGS_HEADER_TABLE_SIZE,
/// left at its default: the client never sends the setting).
pub const TABLE_SIZE: usize = 4096;
/// An entry's size beyond its name and value (RFC 7541, 4.1).
const ENTRY_OVERHEAD: usize = 32;
/// The static table (RFC 7541, Appendix A): names, and the values the
/// client reads (`:status`).
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];
const STATUS: &[u8] = b":status";
const CONTENT_LENGTH: &[u8] = b"content-length";

/// Why a header block cannot be decoded: a COMPRESSION_ERROR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    #[error("the header block ends inside a field")]
    Truncated,
    #[error("an integer in the header block is out of range")]
    Integer,
    #[error("the header block refers to table entry {0}, which does not exist")]
    Index(usize),
    #[error("a Huffman string in the header block is malformed ({0:?})")]
    Huffman(HuffmanError),
    #[error("a dynamic table size update to {0} bytes, above the {TABLE_SIZE} allowed")]
    TableSize(usize),
    #[error("a dynamic table size update after the first field")]
    LateSizeUpdate,
    #[error("a :status or content-length that is not a number")]
    Value,
}

/// What the client reads from a response's header block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Head {
    pub status: Option<u16>,
    pub content_length: Option<u64>,
}

/// Encodes an HPACK integer with an `n`-bit prefix after `flags`.
fn put_int(out: &mut Vec<u8>, flags: u8, n: u8, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// A literal without indexing whose name is static entry `name`.
fn put_literal(out: &mut Vec<u8>, name: usize, value: &str) {
    put_int(out, 0x00, 4, name);
    put_int(out, 0x00, 7, value.len());
    out.extend_from_slice(value.as_bytes());
}

/// The request's header block: GET, the scheme, path and authority, and
/// the headers the HTTP/1.1 client sends (User-Agent, Accept).
pub fn request_block(https: bool, path: &str, authority: &str, agent: &str) -> Vec<u8> {
    request_block_with(https, "GET", path, authority, agent)
}

/// As [`request_block`] with another `method` (static entries for GET and
/// POST, a literal otherwise); the caller appends headers with
/// [`put_header`].
pub fn request_block_with(
    https: bool,
    method: &str,
    path: &str,
    authority: &str,
    agent: &str,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(32 + path.len() + authority.len() + agent.len());
    match method {
        "GET" => b.push(0x80 | 2),
        "POST" => b.push(0x80 | 3),
        m => put_literal(&mut b, 2, m),
    }
    b.push(0x80 | if https { 7 } else { 6 }); // :scheme
    if path == "/" {
        b.push(0x80 | 4);
    } else {
        put_literal(&mut b, 4, path);
    }
    put_literal(&mut b, 1, authority);
    put_literal(&mut b, 58, agent); // user-agent
    put_literal(&mut b, 19, "*/*"); // accept
    b
}

/// Appends a header field as a literal without indexing with a new name;
/// HTTP/2 wants the name in lowercase.
pub fn put_header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0x00);
    put_int(out, 0x00, 7, name.len());
    out.extend(name.bytes().map(|c| c.to_ascii_lowercase()));
    put_int(out, 0x00, 7, value.len());
    out.extend_from_slice(value.as_bytes());
}

/// Appends content-length (static name 28).
pub fn put_content_length(out: &mut Vec<u8>, len: usize) {
    put_literal(out, 28, &len.to_string());
}

/// Reads an integer with an `n`-bit prefix at `*at`.
fn int(src: &[u8], at: &mut usize, n: u8) -> Result<usize, HpackError> {
    let first = *src.get(*at).ok_or(HpackError::Truncated)?;
    *at += 1;
    let max = (1usize << n) - 1;
    let mut v = usize::from(first) & max;
    if v < max {
        return Ok(v);
    }
    let mut shift = 0u32;
    loop {
        let b = *src.get(*at).ok_or(HpackError::Truncated)?;
        *at += 1;
        // Sizes and indexes past 2^28 are no conforming peer's.
        if shift > 21 {
            return Err(HpackError::Integer);
        }
        v += usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
}

/// A string literal at `*at`: (Huffman-coded, its octets as sent).
fn string<'a>(src: &'a [u8], at: &mut usize) -> Result<(bool, &'a [u8]), HpackError> {
    let huff = src.get(*at).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = int(src, at, 7)?;
    let end = at.checked_add(len).ok_or(HpackError::Truncated)?;
    let raw = src.get(*at..end).ok_or(HpackError::Truncated)?;
    *at = end;
    Ok((huff, raw))
}

/// The octets of a string literal, decoded into `buf` when Huffman-coded.
fn octets<'a>(lit: (bool, &'a [u8]), buf: &'a mut Vec<u8>) -> Result<&'a [u8], HpackError> {
    match lit {
        (false, raw) => Ok(raw),
        (true, raw) => {
            buf.clear();
            huffman::decode(raw, buf).map_err(HpackError::Huffman)?;
            Ok(buf)
        }
    }
}

/// The response side of a connection's HPACK context.
pub struct Decoder {
    /// Newest first: index 62 is `dynamic[0]`.
    dynamic: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max: usize,
    /// Bumped whenever the dynamic table changes.
    generation: u64,
    /// The last block decoded, its result, and whether it may be reused.
    last: Vec<u8>,
    last_head: Head,
    last_generation: u64,
    reusable: bool,
    name_buf: Vec<u8>,
    value_buf: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            dynamic: VecDeque::new(),
            size: 0,
            max: TABLE_SIZE,
            generation: 0,
            last: Vec::new(),
            last_head: Head::default(),
            last_generation: 0,
            reusable: false,
            name_buf: Vec::new(),
            value_buf: Vec::new(),
        }
    }
}

impl Decoder {
    /// Decodes a whole header block (HEADERS and its CONTINUATIONs), or
    /// reuses the previous result when that is sure to be the same.
    pub fn head(&mut self, block: &[u8]) -> Result<Head, HpackError> {
        if self.reusable && self.generation == self.last_generation && block == self.last {
            return Ok(self.last_head);
        }
        let before = self.generation;
        let head = self.decode(block)?;
        self.reusable = self.generation == before;
        self.last.clear();
        self.last.extend_from_slice(block);
        self.last_head = head;
        self.last_generation = self.generation;
        Ok(head)
    }

    /// Decodes a block without looking at the previous one: what `head`
    /// must always agree with (the fuzz check holds them side by side).
    pub fn head_without_reuse(&mut self, block: &[u8]) -> Result<Head, HpackError> {
        self.decode(block)
    }

    /// An entry by its HPACK index (static 1..=61, then dynamic).
    fn entry(&self, idx: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match idx {
            1..=61 => {
                let (n, v) = STATIC[idx - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => idx
                .checked_sub(62)
                .and_then(|i| self.dynamic.get(i))
                .map(|(n, v)| (n.as_slice(), v.as_slice()))
                .ok_or(HpackError::Index(idx)),
        }
    }

    fn decode(&mut self, src: &[u8]) -> Result<Head, HpackError> {
        let mut head = Head::default();
        let mut at = 0;
        let mut fields = 0;
        while at < src.len() {
            let b = src[at];
            if b & 0x80 != 0 {
                let idx = int(src, &mut at, 7)?;
                let (n, v) = self.entry(idx)?;
                note(&mut head, n, v)?;
            } else if b & 0xc0 == 0x40 {
                self.indexed_literal(src, &mut at, &mut head)?;
            } else if b & 0xe0 == 0x20 {
                if fields > 0 {
                    return Err(HpackError::LateSizeUpdate);
                }
                let size = int(src, &mut at, 5)?;
                if size > TABLE_SIZE {
                    return Err(HpackError::TableSize(size));
                }
                self.max = size;
                self.evict(0);
                self.generation += 1;
                continue;
            } else {
                self.plain_literal(src, &mut at, &mut head)?;
            }
            fields += 1;
        }
        Ok(head)
    }

    /// A literal with incremental indexing: decoded whole, since it
    /// enters the table.
    fn indexed_literal(
        &mut self,
        src: &[u8],
        at: &mut usize,
        head: &mut Head,
    ) -> Result<(), HpackError> {
        let idx = int(src, at, 6)?;
        let name = if idx == 0 {
            let lit = string(src, at)?;
            octets(lit, &mut self.name_buf)?.to_vec()
        } else {
            self.entry(idx)?.0.to_vec()
        };
        let lit = string(src, at)?;
        let value = octets(lit, &mut self.value_buf)?.to_vec();
        note(head, &name, &value)?;
        self.insert(name, value);
        Ok(())
    }

    /// A literal without indexing (or never indexed): the value is decoded
    /// only when the client needs it.
    fn plain_literal(
        &mut self,
        src: &[u8],
        at: &mut usize,
        head: &mut Head,
    ) -> Result<(), HpackError> {
        let idx = int(src, at, 4)?;
        // The one name of the two the client reads, if it is one.
        let wanted = |n: &[u8]| [STATUS, CONTENT_LENGTH].into_iter().find(|&w| w == n);
        let name = if idx == 0 {
            let lit = string(src, at)?;
            wanted(octets(lit, &mut self.name_buf)?)
        } else {
            wanted(self.entry(idx)?.0)
        };
        let lit = string(src, at)?;
        match name {
            Some(name) => note(head, name, octets(lit, &mut self.value_buf)?),
            None => Ok(()),
        }
    }

    fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        self.generation += 1;
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max {
            // An entry larger than the table empties it (RFC 7541, 4.4).
            self.dynamic.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.size += size;
        self.dynamic.push_front((name, value));
    }

    /// Drops the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.dynamic.pop_back() {
                Some((n, v)) => self.size -= n.len() + v.len() + ENTRY_OVERHEAD,
                None => break,
            }
        }
    }
}

/// Keeps what the client reads of one field.
fn note(head: &mut Head, name: &[u8], value: &[u8]) -> Result<(), HpackError> {
    let number = || {
        std::str::from_utf8(value)
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or(HpackError::Value)
    };
    if name == STATUS {
        let n = number()?;
        head.status = Some(u16::try_from(n).map_err(|_| HpackError::Value)?);
    } else if name == CONTENT_LENGTH {
        head.content_length = Some(number()?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn hpack_rfc7541_response_sequence_with_huffman_and_eviction() {
        // RFC 7541 C.6: three responses, a 256-byte table, entries evicted.
        let mut d = Decoder::default();
        // The peer shrinks the table to 256 bytes first (a size update).
        let mut first = vec![0x3f, 0xe1, 0x01];
        first.extend(hex(
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 \
             82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        ));
        let h = d.head(&first).unwrap();
        assert_eq!(h.status, Some(302));
        assert_eq!(d.size, 222);
        let h = d.head(&hex("4883 640e ff c1 c0 bf")).unwrap();
        assert_eq!(h.status, Some(307));
        assert_eq!(d.size, 222);
        let third = hex(
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b \
             d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 \
             0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        );
        assert_eq!(d.head(&third).unwrap().status, Some(200));
        assert_eq!(d.size, 215);
        assert_eq!(d.dynamic.len(), 3);
        assert_eq!(d.dynamic[0].0, b"set-cookie");
        // The same block again is decoded again (it changed the table),
        // and its index 65 is gone by now.
        assert_eq!(d.head(&third), Err(HpackError::Index(65)));
    }

    #[test]
    fn hpack_reuses_an_identical_block_only_when_the_table_is_unchanged() {
        let mut d = Decoder::default();
        // :status 200, content-length literal without indexing "1024".
        let mut block = vec![0x88, 0x0f, 0x0d, 0x04];
        block.extend_from_slice(b"1024");
        let want = Head {
            status: Some(200),
            content_length: Some(1024),
        };
        assert_eq!(d.head(&block).unwrap(), want);
        assert!(d.reusable);
        assert_eq!(d.head(&block).unwrap(), want);
        // A block that indexes a field is never reused.
        let mut idx = vec![0x48, 0x03];
        idx.extend_from_slice(b"404");
        idx.extend([0x5c, 0x01, b'7']); // content-length 7, indexed
        let h = d.head(&idx).unwrap();
        assert_eq!((h.status, h.content_length), (Some(404), Some(7)));
        assert!(!d.reusable);
        // Now 62 is content-length 7 and 63 is :status 404.
        assert_eq!(d.head(&[0xbf, 0xbe]).unwrap().content_length, Some(7));
        assert_eq!(d.head(&[0xbf, 0xbe]).unwrap().status, Some(404));
        // A size update to 0 empties the table: the same block now fails.
        assert_eq!(d.head(&[0x20, 0x88]).unwrap().status, Some(200));
        assert_eq!(d.head(&[0xbe]), Err(HpackError::Index(62)));
    }

    #[test]
    fn hpack_refuses_malformed_blocks() {
        let mut d = Decoder::default();
        assert_eq!(d.head(&[0xc0]), Err(HpackError::Index(64)));
        assert_eq!(d.head(&[0x80]), Err(HpackError::Index(0)));
        assert_eq!(
            d.head(&[0x0f, 0x0d, 0x05, b'1']),
            Err(HpackError::Truncated)
        );
        assert_eq!(
            d.head(&[0x3f, 0xe2, 0x1f]),
            Err(HpackError::TableSize(4097))
        );
        assert_eq!(d.head(&[0x88, 0x20]), Err(HpackError::LateSizeUpdate));
        assert_eq!(
            d.head(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            Err(HpackError::Integer)
        );
        assert_eq!(d.head(&[0x08, 0x02, b'x', b'1']), Err(HpackError::Value));
        // Garbage never panics.
        for seed in 0u32..2000 {
            let bytes: Vec<u8> = (0..(seed % 40))
                .map(|i| (seed.wrapping_mul(2654435761).rotate_left(i)) as u8)
                .collect();
            let _ = d.head(&bytes);
        }
    }

    #[test]
    fn hpack_request_block_decodes_to_what_was_asked() {
        let b = request_block(false, "/1k.bin", "198.18.0.2:8080", "linerate/0");
        assert_eq!(&b[..2], &[0x82, 0x86]);
        let mut d = Decoder::default();
        assert_eq!(d.head(&b).unwrap(), Head::default());
        assert_eq!(request_block(true, "/", "h", "a")[..3], [0x82, 0x87, 0x84]);
        let mut long = Vec::new();
        put_int(&mut long, 0, 5, 1337);
        assert_eq!(long, [31, 154, 10]); // RFC 7541 C.1.2
        let mut at = 0;
        assert_eq!(int(&long, &mut at, 5), Ok(1337));
    }
}

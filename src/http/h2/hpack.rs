//! HPACK (RFC 7541) for a client that only needs a response's `:status`
//! and `content-length`: the request's header block, built once and
//! entered into the server's dynamic table by a connection's first request
//! (later ones name it by index; literals without indexing for a server
//! whose table is too small), and a decoder that keeps the dynamic table of any
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
#[cfg(test)]
fn put_literal(out: &mut Vec<u8>, name: usize, value: &str) {
    put_int(out, 0x00, 4, name);
    put_int(out, 0x00, 7, value.len());
    out.extend_from_slice(value.as_bytes());
}

/// A field name: a static table entry's, or one of its own (lowercase).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Name {
    Static(usize),
    New(String),
}

/// One field of a request: a whole static entry, or a name and a value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Field {
    Static(usize),
    Literal(Name, String),
}

/// A request's fields before they are encoded: the pseudo-headers, the
/// headers the HTTP/1.1 client sends (User-Agent, Accept), then any
/// `header` and `content_length`.
#[derive(Debug, Clone)]
pub struct RequestFields(Vec<Field>);

impl RequestFields {
    /// `method` is a static entry for GET and POST, a literal otherwise;
    /// a path of `/` is a static entry too.
    pub fn new(https: bool, method: &str, path: &str, authority: &str, agent: &str) -> Self {
        let lit = |n: usize, v: &str| Field::Literal(Name::Static(n), v.to_owned());
        let mut f = vec![
            match method {
                "GET" => Field::Static(2),
                "POST" => Field::Static(3),
                m => lit(2, m),
            },
            Field::Static(if https { 7 } else { 6 }), // :scheme
        ];
        f.push(if path == "/" {
            Field::Static(4)
        } else {
            lit(4, path)
        });
        f.push(lit(1, authority));
        f.push(lit(58, agent)); // user-agent
        f.push(lit(19, "*/*")); // accept
        RequestFields(f)
    }

    /// A header of its own; HTTP/2 wants the name in lowercase.
    pub fn header(&mut self, name: &str, value: &str) {
        let name = name.to_ascii_lowercase();
        self.0
            .push(Field::Literal(Name::New(name), value.to_owned()));
    }

    /// content-length (static name 28).
    pub fn content_length(&mut self, len: usize) {
        self.0
            .push(Field::Literal(Name::Static(28), len.to_string()));
    }

    /// The three encodings of the block (see [`RequestBlock`]).
    pub fn encode(&self) -> RequestBlock {
        let literals = self
            .0
            .iter()
            .filter(|f| matches!(f, Field::Literal(..)))
            .count();
        let mut b = RequestBlock {
            inserting: Vec::new(),
            indexed: Vec::new(),
            plain: Vec::new(),
            table_bytes: 0,
        };
        let mut nth = 0;
        for f in &self.0 {
            match f {
                Field::Static(i) => {
                    for out in [&mut b.inserting, &mut b.indexed, &mut b.plain] {
                        put_int(out, 0x80, 7, *i);
                    }
                }
                Field::Literal(name, value) => {
                    let name_len = match name {
                        Name::Static(i) => {
                            put_int(&mut b.inserting, 0x40, 6, *i);
                            put_int(&mut b.plain, 0x00, 4, *i);
                            STATIC[i - 1].0.len()
                        }
                        Name::New(n) => {
                            for (out, flags) in [(&mut b.inserting, 0x40), (&mut b.plain, 0x00)] {
                                out.push(flags);
                                put_int(out, 0x00, 7, n.len());
                                out.extend_from_slice(n.as_bytes());
                            }
                            n.len()
                        }
                    };
                    for out in [&mut b.inserting, &mut b.plain] {
                        put_int(out, 0x00, 7, value.len());
                        out.extend_from_slice(value.as_bytes());
                    }
                    // The newest entry is 62: the first literal inserted
                    // is the oldest of them once all are in.
                    put_int(&mut b.indexed, 0x80, 7, 62 + (literals - 1 - nth));
                    nth += 1;
                    b.table_bytes += name_len + value.len() + ENTRY_OVERHEAD;
                }
            }
        }
        b
    }
}

/// A request's header block, encoded three ways. Every request of a run
/// is the same, so the first on a connection enters its literal fields
/// into the server's dynamic table (incremental indexing) and every later
/// one names them by index, as h2load does: a few bytes per request for
/// the server to decode instead of the path, authority and user agent
/// (nginx spent about a tenth of its time per request on them). A server
/// whose table cannot hold them gets literals without indexing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestBlock {
    inserting: Vec<u8>,
    indexed: Vec<u8>,
    plain: Vec<u8>,
    /// What the inserted entries take of the server's table (RFC 7541, 4.1).
    table_bytes: usize,
}

impl RequestBlock {
    /// A block already encoded that leaves the dynamic table alone
    /// (static entries, literals without indexing): sent as it is.
    pub fn fixed(block: &[u8]) -> Self {
        RequestBlock {
            inserting: block.to_vec(),
            indexed: block.to_vec(),
            plain: block.to_vec(),
            table_bytes: 0,
        }
    }
}

/// The request side of a connection's HPACK context: what the server's
/// dynamic table holds of the client's entries, and the size it allows.
#[derive(Debug, Clone)]
pub struct Encoder {
    /// The table size both ends use: SETTINGS_HEADER_TABLE_SIZE's default
    /// until the server lowers it.
    max: usize,
    /// A size update owed at the start of the next block (RFC 7541, 4.2).
    update: Option<usize>,
    /// The inserting encoding of the block whose entries the table holds.
    held: Option<Vec<u8>>,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder {
            max: TABLE_SIZE,
            update: None,
            held: None,
        }
    }
}

impl Encoder {
    /// The server's SETTINGS_HEADER_TABLE_SIZE. A lower one is signalled
    /// at the start of the next block, and the entries go in again (the
    /// update may have evicted them); a higher one changes nothing, since
    /// the client needs far less than the default.
    pub fn peer_table_size(&mut self, size: u32) {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        if size < self.max {
            self.max = size;
            self.update = Some(size);
            self.held = None;
        }
    }

    /// Appends the next request's header block to `out`.
    pub fn put(&mut self, block: &RequestBlock, out: &mut Vec<u8>) {
        if let Some(size) = self.update.take() {
            put_int(out, 0x20, 5, size);
        }
        if self.held.as_deref() == Some(block.inserting.as_slice()) {
            out.extend_from_slice(&block.indexed);
        } else if block.table_bytes <= self.max {
            out.extend_from_slice(&block.inserting);
            self.held = Some(block.inserting.clone());
        } else {
            out.extend_from_slice(&block.plain);
        }
    }
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

    /// Every field of a block, decoded whole with `d`'s table (a test
    /// decoder: the client's own keeps only what it reads).
    fn fields(d: &mut Decoder, src: &[u8]) -> Vec<(String, String)> {
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        let mut out = Vec::new();
        let mut at = 0;
        while at < src.len() {
            let b = src[at];
            if b & 0x80 != 0 {
                let idx = int(src, &mut at, 7).unwrap();
                let (n, v) = d.entry(idx).unwrap();
                out.push((text(n), text(v)));
            } else if b & 0xe0 == 0x20 {
                let size = int(src, &mut at, 5).unwrap();
                d.max = size;
                d.evict(0);
                out.push(("(table size)".into(), size.to_string()));
            } else {
                let indexing = b & 0xc0 == 0x40;
                let idx = int(src, &mut at, if indexing { 6 } else { 4 }).unwrap();
                let name = if idx == 0 {
                    string(src, &mut at).unwrap().1.to_vec()
                } else {
                    d.entry(idx).unwrap().0.to_vec()
                };
                let value = string(src, &mut at).unwrap().1.to_vec();
                out.push((text(&name), text(&value)));
                if indexing {
                    d.insert(name, value);
                }
            }
        }
        out
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn hpack_a_request_enters_the_table_once_then_goes_by_index() {
        let mut f = RequestFields::new(false, "GET", "/1k.bin", "198.18.0.2:8080", "linerate/0");
        f.header("X-Run", "7");
        let block = f.encode();
        let want = pairs(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/1k.bin"),
            (":authority", "198.18.0.2:8080"),
            ("user-agent", "linerate/0"),
            ("accept", "*/*"),
            ("x-run", "7"),
        ]);
        let (mut enc, mut dec) = (Encoder::default(), Decoder::default());
        let mut sizes = Vec::new();
        for _ in 0..3 {
            let mut out = Vec::new();
            enc.put(&block, &mut out);
            sizes.push(out.len());
            assert_eq!(fields(&mut dec, &out), want);
            // The client's own decoder keeps the same table.
            assert_eq!(dec.dynamic.len(), 5);
        }
        // Two static fields and five indexes after the first request.
        assert_eq!(sizes[1], 7);
        assert_eq!(sizes[1], sizes[2]);
        assert!(sizes[0] > 40, "{sizes:?}");
        assert_eq!(&dec.dynamic[4].1, b"/1k.bin");
        assert_eq!(dec.size, block.table_bytes);

        // Another block on the same connection goes in, then by index.
        let other = RequestFields::new(true, "DELETE", "/", "h", "a").encode();
        let mut out = Vec::new();
        enc.put(&other, &mut out);
        assert_eq!(out[..2], [0x42, 6]); // :method DELETE, indexed
        let got = fields(&mut dec, &out);
        assert_eq!(got[0], (":method".to_string(), "DELETE".to_string()));
        out.clear();
        enc.put(&other, &mut out);
        assert_eq!(fields(&mut dec, &out), got);
        assert_eq!(out[..3], [0x80 | 65, 0x87, 0x84]);

        // A literal-free block is the same all three ways.
        let fixed = RequestBlock::fixed(&[0x82, 0x86, 0x84]);
        out.clear();
        enc.put(&fixed, &mut out);
        assert_eq!(out, [0x82, 0x86, 0x84]);

        let mut long = Vec::new();
        put_int(&mut long, 0, 5, 1337);
        assert_eq!(long, [31, 154, 10]); // RFC 7541 C.1.2
        let mut at = 0;
        assert_eq!(int(&long, &mut at, 5), Ok(1337));
    }

    #[test]
    fn hpack_a_smaller_server_table_is_signalled_and_honoured() {
        let block = RequestFields::new(false, "GET", "/a", "b", "c").encode();
        let want = pairs(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/a"),
            (":authority", "b"),
            ("user-agent", "c"),
            ("accept", "*/*"),
        ]);
        let (mut enc, mut dec) = (Encoder::default(), Decoder::default());
        let mut out = Vec::new();
        enc.put(&block, &mut out);
        assert_eq!(fields(&mut dec, &out), want);
        // A larger table changes nothing.
        enc.peer_table_size(65_536);
        out.clear();
        enc.put(&block, &mut out);
        assert_eq!(out.len(), 6);
        // Room for the entries: the size update, then they go in again.
        enc.peer_table_size(block.table_bytes as u32);
        out.clear();
        enc.put(&block, &mut out);
        let mut with_size = pairs(&[("(table size)", &block.table_bytes.to_string())]);
        with_size.extend(want.clone());
        assert_eq!(fields(&mut dec, &out), with_size);
        out.clear();
        enc.put(&block, &mut out);
        assert_eq!(out.len(), 6);
        assert_eq!(fields(&mut dec, &out), want);
        // No room: literals without indexing from then on, the table empty.
        enc.peer_table_size(0);
        for first in [true, false] {
            out.clear();
            enc.put(&block, &mut out);
            assert_eq!(out[0] == 0x20, first);
            let got = fields(&mut dec, &out);
            assert_eq!(got[usize::from(first)..], want[..]);
            assert!(dec.dynamic.is_empty());
            assert_eq!(out[usize::from(first)..], block.plain[..]);
        }
        assert_eq!(block.plain, {
            let mut p = vec![0x82, 0x86];
            put_literal(&mut p, 4, "/a");
            put_literal(&mut p, 1, "b");
            put_literal(&mut p, 58, "c");
            put_literal(&mut p, 19, "*/*");
            p
        });
    }
}

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
mod tests;

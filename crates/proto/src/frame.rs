//! The linerate header every engine puts at the start of each UDP payload,
//! so loss, reorder and latency accounting never depend on the engine:
//!
//! ```text
//!  0    2      4                 10                  18
//!  | LR | flow | sequence (48 b) | TX timestamp (ns) |
//! ```
//! All fields big-endian; the timestamp is ns of the sender's realtime clock.

pub const HEADER_LEN: usize = 18;
pub const MAGIC: [u8; 2] = *b"LR";
pub const SEQ_MASK: u64 = (1 << 48) - 1;

/// The linerate payload header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub flow: u16,
    pub seq: u64,
    pub sent_ns: u64,
}

impl Header {
    // Per frame on every engine's hot path, and in another crate than its
    // callers: inlined across the crate boundary.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) {
        buf[0..2].copy_from_slice(&MAGIC);
        buf[2..4].copy_from_slice(&self.flow.to_be_bytes());
        buf[4..10].copy_from_slice(&(self.seq & SEQ_MASK).to_be_bytes()[2..8]);
        buf[10..18].copy_from_slice(&self.sent_ns.to_be_bytes());
    }

    /// `None` for datagrams that are too short or not ours.
    #[inline]
    pub fn parse(buf: &[u8]) -> Option<Header> {
        if buf.len() < HEADER_LEN || buf[0..2] != MAGIC {
            return None;
        }
        let mut seq = [0u8; 8];
        seq[2..8].copy_from_slice(&buf[4..10]);
        Some(Header {
            flow: u16::from_be_bytes([buf[2], buf[3]]),
            seq: u64::from_be_bytes(seq),
            sent_ns: u64::from_be_bytes(buf[10..18].try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let h = Header {
            flow: 513,
            seq: (1 << 47) + 5,
            sent_ns: 123_456_789_012,
        };
        let mut buf = [0u8; 18];
        h.emit(&mut buf);
        assert_eq!(Header::parse(&buf), Some(h));
        assert_eq!(Header::parse(&buf[..17]), None);
        buf[0] = b'X';
        assert_eq!(Header::parse(&buf), None);
    }
}

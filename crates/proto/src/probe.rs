//! The probe wire format: a fixed 48-byte header, then padding up to the
//! probe's size. The responder turns a request into a reply in place (same
//! length, so a reply is never larger than its request) and fills in its
//! receive and send times and how many probes of the session it accepted.
//!
//! ```text
//!  0      4   5    6      8            16     20        24
//!  | LRLP | v | kind | 0  |   token    |  seq | rx_count | client_tx_ns
//!  32               40                48
//!  | responder_rx_ns | responder_tx_ns | padding ...
//! ```
//! All integers big-endian; times are ns of the sender's realtime clock.

use serde::{Deserialize, Serialize};

pub const MAGIC: [u8; 4] = *b"LRLP";
pub const VERSION: u8 = 1;
/// Bytes every probe carries before its padding.
pub const HEADER_LEN: usize = 48;
/// Default UDP payload of a probe. A 64-byte Ethernet frame leaves 18 bytes
/// of UDP payload over IPv4, less than a 64-bit token, a sequence number and
/// a send time; probes therefore default to 64 bytes of payload (110-byte
/// frames over IPv4), irtt's and TWAMP's order of size.
pub const DEFAULT_PAYLOAD: u16 = 64;
/// Largest payload a probe may have (one unfragmented datagram at MTU 1500).
pub const MAX_PAYLOAD: u16 = 1452;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Reply,
}

/// A parsed probe header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub kind: Kind,
    pub token: u64,
    pub seq: u32,
    /// Probes of the session the responder accepted so far, this one
    /// included (replies only): tells forward from reverse loss.
    pub rx_count: u32,
    pub client_tx_ns: u64,
    pub responder_rx_ns: u64,
    pub responder_tx_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    #[error("shorter than a probe header")]
    Short,
    #[error("not a linerate probe")]
    BadMagic,
    #[error("probe version {0} is not {VERSION}")]
    BadVersion(u8),
    #[error("unknown probe kind {0}")]
    BadKind(u8),
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}
fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

impl Probe {
    pub fn request(token: u64, seq: u32, client_tx_ns: u64) -> Self {
        Probe {
            kind: Kind::Request,
            token,
            seq,
            rx_count: 0,
            client_tx_ns,
            responder_rx_ns: 0,
            responder_tx_ns: 0,
        }
    }

    /// Parses a datagram's header; the length is checked before any read.
    pub fn parse(b: &[u8]) -> Result<Probe, ProbeError> {
        if b.len() < HEADER_LEN {
            return Err(ProbeError::Short);
        }
        if b[0..4] != MAGIC {
            return Err(ProbeError::BadMagic);
        }
        if b[4] != VERSION {
            return Err(ProbeError::BadVersion(b[4]));
        }
        let kind = match b[5] {
            1 => Kind::Request,
            2 => Kind::Reply,
            k => return Err(ProbeError::BadKind(k)),
        };
        Ok(Probe {
            kind,
            token: be_u64(b, 8),
            seq: be_u32(b, 16),
            rx_count: be_u32(b, 20),
            client_tx_ns: be_u64(b, 24),
            responder_rx_ns: be_u64(b, 32),
            responder_tx_ns: be_u64(b, 40),
        })
    }

    /// Writes the header into `b` (at least [`HEADER_LEN`] bytes; the rest
    /// is left as it is). Returns false when `b` is too short.
    pub fn emit(&self, b: &mut [u8]) -> bool {
        if b.len() < HEADER_LEN {
            return false;
        }
        b[0..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[5] = match self.kind {
            Kind::Request => 1,
            Kind::Reply => 2,
        };
        b[6] = 0;
        b[7] = 0;
        b[8..16].copy_from_slice(&self.token.to_be_bytes());
        b[16..20].copy_from_slice(&self.seq.to_be_bytes());
        b[20..24].copy_from_slice(&self.rx_count.to_be_bytes());
        b[24..32].copy_from_slice(&self.client_tx_ns.to_be_bytes());
        b[32..40].copy_from_slice(&self.responder_rx_ns.to_be_bytes());
        b[40..48].copy_from_slice(&self.responder_tx_ns.to_be_bytes());
        true
    }
}

/// What the client knows of one probe it sent, as the agent hands it to the
/// controller (a JSON array, to keep thousands of them small).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProbeSample(
    /// Sequence number.
    pub u32,
    /// Client send time, client clock ns.
    pub u64,
    /// Client receive time of the first reply, 0 when none came.
    pub u64,
    /// Responder receive time, responder clock ns (0 without reply).
    pub u64,
    /// Responder send time, responder clock ns.
    pub u64,
    /// The responder's accepted-probe count when it answered.
    pub u32,
    /// Bit 0: the reply came after a later probe's; bits 8..: duplicates.
    pub u32,
);

impl ProbeSample {
    pub fn seq(&self) -> u32 {
        self.0
    }
    pub fn client_tx(&self) -> u64 {
        self.1
    }
    pub fn answered(&self) -> bool {
        self.2 != 0
    }
    pub fn reordered(&self) -> bool {
        self.6 & 1 != 0
    }
    pub fn duplicates(&self) -> u32 {
        self.6 >> 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let mut buf = [0u8; 64];
        let mut p = Probe::request(0xdead_beef_0102_0304, 7, 123);
        assert!(p.emit(&mut buf));
        assert_eq!(Probe::parse(&buf), Ok(p));
        p.kind = Kind::Reply;
        p.rx_count = 5;
        p.responder_rx_ns = 9;
        p.responder_tx_ns = 10;
        assert!(p.emit(&mut buf));
        assert_eq!(Probe::parse(&buf), Ok(p));
        assert_eq!(Probe::parse(&buf[..47]), Err(ProbeError::Short));
        let mut bad = buf;
        bad[0] = b'X';
        assert_eq!(Probe::parse(&bad), Err(ProbeError::BadMagic));
        let mut bad = buf;
        bad[5] = 9;
        assert_eq!(Probe::parse(&bad), Err(ProbeError::BadKind(9)));
        assert!(!p.emit(&mut [0u8; 10]));
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed: u64 = 0x1234_5678_9abc_def1;
        for _ in 0..5000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 80) as usize;
            let mut b: Vec<u8> = (0..len).map(|i| (seed >> (i % 56)) as u8).collect();
            if len >= 6 && seed % 3 == 0 {
                b[0..4].copy_from_slice(&MAGIC);
                b[4] = VERSION;
            }
            let _ = Probe::parse(&b);
        }
    }

    #[test]
    fn sample_is_a_small_array() {
        let s = ProbeSample(1, 2, 3, 4, 5, 6, 1 | (2 << 8));
        assert_eq!(serde_json::to_string(&s).unwrap(), "[1,2,3,4,5,6,513]");
        assert!(s.reordered());
        assert_eq!(s.duplicates(), 2);
    }
}

//! ICMP echo for monitor targets that run no responder: an echo request
//! carries a 64-bit token and its send time in its data, so a reply is
//! matched by its data whatever identifier the kernel chose.

use crate::sys::icmp::{self as ffi, IcmpKind};
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::Duration;

const ECHO_REQUEST_V4: u8 = 8;
const ECHO_REPLY_V4: u8 = 0;
const ECHO_REQUEST_V6: u8 = 128;
const ECHO_REPLY_V6: u8 = 129;
/// ICMP header (8) + token (8) + send time (8) + seq (4) + padding.
pub const ECHO_LEN: usize = 8 + 8 + 8 + 4 + 36;

pub struct Pinger {
    sock: UdpSocket,
    kind: IcmpKind,
    target: IpAddr,
    token: u64,
    id: u16,
}

/// RFC 1071 ones'-complement checksum.
pub fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in b.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], 0])
        };
        sum += u32::from(w);
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An echo request's bytes.
pub fn echo_request(v6: bool, id: u16, seq: u32, token: u64, tx_ns: u64) -> Vec<u8> {
    let mut b = vec![0u8; ECHO_LEN];
    b[0] = if v6 { ECHO_REQUEST_V6 } else { ECHO_REQUEST_V4 };
    b[4..6].copy_from_slice(&id.to_be_bytes());
    b[6..8].copy_from_slice(&(seq as u16).to_be_bytes());
    b[8..16].copy_from_slice(&token.to_be_bytes());
    b[16..24].copy_from_slice(&tx_ns.to_be_bytes());
    b[24..28].copy_from_slice(&seq.to_be_bytes());
    if !v6 {
        // ICMPv6 checksums cover a pseudo-header; the kernel fills them in.
        let c = checksum(&b);
        b[2..4].copy_from_slice(&c.to_be_bytes());
    }
    b
}

/// A reply's (seq, send time) if it answers one of `token`'s requests.
pub fn parse_reply(v6: bool, raw_v4: bool, b: &[u8], token: u64) -> Option<(u32, u64)> {
    let b = if raw_v4 {
        let ihl = usize::from(*b.first()? & 0x0f) * 4;
        b.get(ihl..)?
    } else {
        b
    };
    if b.len() < 28 {
        return None;
    }
    let want = if v6 { ECHO_REPLY_V6 } else { ECHO_REPLY_V4 };
    if b[0] != want || b[1] != 0 {
        return None;
    }
    let u64_at = |i: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[i..i + 8]);
        u64::from_be_bytes(a)
    };
    if u64_at(8) != token {
        return None;
    }
    let mut s = [0u8; 4];
    s.copy_from_slice(&b[24..28]);
    Some((u32::from_be_bytes(s), u64_at(16)))
}

impl Pinger {
    pub fn open(target: IpAddr, token: u64) -> io::Result<Pinger> {
        let (sock, kind) = ffi::icmp_socket(target.is_ipv6())?;
        Ok(Pinger {
            sock,
            kind,
            target,
            token,
            id: (token >> 48) as u16,
        })
    }

    pub fn send(&self, seq: u32, tx_ns: u64) -> io::Result<()> {
        let b = echo_request(self.target.is_ipv6(), self.id, seq, self.token, tx_ns);
        self.sock
            .send_to(&b, SocketAddr::new(self.target, 0))
            .map(drop)
    }

    /// The next reply to one of our requests within `wait`: (seq, tx_ns).
    pub fn recv(&self, wait: Duration, buf: &mut [u8]) -> Option<(u32, u64)> {
        self.sock
            .set_read_timeout(Some(wait.max(Duration::from_micros(100))))
            .ok()?;
        loop {
            let (n, from) = self.sock.recv_from(buf).ok()?;
            if from.ip() != self.target {
                continue;
            }
            let raw_v4 = self.kind == IcmpKind::Raw && self.target.is_ipv4();
            if let Some(r) = parse_reply(self.target.is_ipv6(), raw_v4, &buf[..n], self.token) {
                return Some(r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_and_reply_parse() {
        let req = echo_request(false, 7, 3, 99, 1234);
        assert_eq!(checksum(&req), 0, "a valid packet sums to zero");
        let mut reply = req.clone();
        reply[0] = ECHO_REPLY_V4;
        assert_eq!(parse_reply(false, false, &reply, 99), Some((3, 1234)));
        assert_eq!(parse_reply(false, false, &reply, 98), None);
        assert_eq!(
            parse_reply(false, false, &req, 99),
            None,
            "a request is no reply"
        );
        let mut with_ip = vec![0x45u8; 20];
        with_ip.extend_from_slice(&reply);
        assert_eq!(parse_reply(false, true, &with_ip, 99), Some((3, 1234)));
        assert_eq!(parse_reply(false, true, &[0x4f], 99), None);
    }
}

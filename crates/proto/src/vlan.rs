//! 802.1Q VLAN tags on test frames: one tag (`100`, TPID 0x8100) or QinQ
//! (`100.200`: an 802.1ad service tag 0x88a8 outside, a customer tag
//! 0x8100 inside). Tags count in the frame size: a 64 B frame with one
//! tag is 64 B on the wire, tag included, and carries 4 bytes less payload.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// TPID of a customer (802.1Q) tag.
pub const TPID_8021Q: u16 = 0x8100;
/// TPID of a service (802.1ad) tag, the outer tag of QinQ.
pub const TPID_8021AD: u16 = 0x88a8;
/// Bytes of one tag: TPID and TCI.
pub const TAG_LEN: usize = 4;

/// The VLAN tags a side's frames carry.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, JsonSchema)]
pub struct Vlan {
    /// The VLAN id (1..=4094); the outer (802.1ad) one with `inner`.
    pub id: u16,
    /// QinQ: the inner (802.1Q) VLAN id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner: Option<u16>,
}

/// Why a VLAN could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VlanError {
    #[error(
        "VLAN '{0}' is not a VLAN id: give a number 1..4094 (e.g. 100), or two joined by a \
         dot for QinQ (100.200: outer 802.1ad tag 100, inner 802.1Q tag 200)"
    )]
    NotVlan(String),
    #[error(
        "VLAN id {0} is out of range: 802.1Q ids are 1..4094 (0 means untagged priority, \
         4095 is reserved); give one in 1..4094"
    )]
    Range(u32),
}

fn id(s: &str, whole: &str) -> Result<u16, VlanError> {
    let n: u32 = s
        .trim()
        .parse()
        .map_err(|_| VlanError::NotVlan(whole.to_string()))?;
    u16::try_from(n)
        .ok()
        .filter(|v| (1..=4094).contains(v))
        .ok_or(VlanError::Range(n))
}

impl Vlan {
    /// One 802.1Q tag.
    pub fn single(id: u16) -> Result<Vlan, VlanError> {
        Vlan::check(Vlan { id, inner: None })
    }

    /// Ids in range, or why not (for values read from plans and peers).
    pub fn check(v: Vlan) -> Result<Vlan, VlanError> {
        for i in std::iter::once(v.id).chain(v.inner) {
            if !(1..=4094).contains(&i) {
                return Err(VlanError::Range(u32::from(i)));
            }
        }
        Ok(v)
    }

    /// Tags on the wire: 1, or 2 for QinQ.
    pub fn tags(&self) -> usize {
        1 + usize::from(self.inner.is_some())
    }

    /// Bytes the tags add in front of the EtherType.
    pub fn len(&self) -> usize {
        self.tags() * TAG_LEN
    }

    /// Never empty: a `Vlan` is at least one tag (clippy's pair to `len`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the tags (TPID + TCI each, priority 0) into `out`, which
    /// must hold [`Vlan::len`] bytes; the frame's EtherType follows them.
    pub fn emit(&self, out: &mut [u8]) {
        let mut put = |at: usize, tpid: u16, id: u16| {
            out[at..at + 2].copy_from_slice(&tpid.to_be_bytes());
            out[at + 2..at + 4].copy_from_slice(&id.to_be_bytes());
        };
        match self.inner {
            None => put(0, TPID_8021Q, self.id),
            Some(inner) => {
                put(0, TPID_8021AD, self.id);
                put(TAG_LEN, TPID_8021Q, inner);
            }
        }
    }
}

impl std::str::FromStr for Vlan {
    type Err = VlanError;
    fn from_str(s: &str) -> Result<Vlan, VlanError> {
        match s.split_once('.') {
            None => Ok(Vlan {
                id: id(s, s)?,
                inner: None,
            }),
            Some((o, i)) => Ok(Vlan {
                id: id(o, s)?,
                inner: Some(id(i, s)?),
            }),
        }
    }
}

impl std::fmt::Display for Vlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.inner {
            None => write!(f, "{}", self.id),
            Some(i) => write!(f, "{}.{i}", self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_and_qinq() {
        assert_eq!(
            "100".parse(),
            Ok(Vlan {
                id: 100,
                inner: None
            })
        );
        let q: Vlan = "100.200".parse().unwrap();
        assert_eq!(
            q,
            Vlan {
                id: 100,
                inner: Some(200)
            }
        );
        assert_eq!(q.to_string(), "100.200");
        assert_eq!((q.tags(), q.len()), (2, 8));
        assert_eq!("1".parse::<Vlan>().map(|v| v.len()), Ok(4));
        assert_eq!("4094".parse::<Vlan>().map(|v| v.id), Ok(4094));
    }

    #[test]
    fn refuses_out_of_range_and_garbage() {
        assert_eq!("0".parse::<Vlan>(), Err(VlanError::Range(0)));
        assert_eq!("4095".parse::<Vlan>(), Err(VlanError::Range(4095)));
        assert_eq!("100.5000".parse::<Vlan>(), Err(VlanError::Range(5000)));
        assert!("99999999999".parse::<Vlan>().is_err());
        assert!(matches!("x".parse::<Vlan>(), Err(VlanError::NotVlan(_))));
        assert!(matches!(
            "1.2.3".parse::<Vlan>(),
            Err(VlanError::NotVlan(_))
        ));
        assert!(Vlan::check(Vlan { id: 0, inner: None }).is_err());
        let e = "4095".parse::<Vlan>().unwrap_err().to_string();
        assert!(e.contains("1..4094"), "{e}");
    }

    #[test]
    fn tag_bytes() {
        let mut b = [0u8; 8];
        Vlan::single(100).unwrap().emit(&mut b[..4]);
        assert_eq!(&b[..4], &[0x81, 0x00, 0x00, 100]);
        Vlan {
            id: 0x123,
            inner: Some(0xfa0),
        }
        .emit(&mut b);
        assert_eq!(b, [0x88, 0xa8, 0x01, 0x23, 0x81, 0x00, 0x0f, 0xa0]);
    }
}

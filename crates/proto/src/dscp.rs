//! DSCP code points (RFC 2474): the six upper bits of the IPv4 TOS byte
//! and of the IPv6 traffic class, the two lower ones being ECN (RFC 3168).
//! A test marks its packets with one (`--dscp`), given as a number or by
//! the names of the PHBs that use it: class selectors `cs0`..`cs7`
//! (RFC 2474), assured forwarding `af11`..`af43` (RFC 2597), `ef`
//! (RFC 3246), `va` (voice admit, RFC 5865) and `le` (lower effort,
//! RFC 8622).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A DSCP value, 0..=63.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(try_from = "u8", into = "u8")]
pub struct Dscp(u8);

/// Every name and its value, in the order the error message lists them.
const NAMES: [(&str, u8); 23] = [
    ("cs0", 0),
    ("cs1", 8),
    ("cs2", 16),
    ("cs3", 24),
    ("cs4", 32),
    ("cs5", 40),
    ("cs6", 48),
    ("cs7", 56),
    ("af11", 10),
    ("af12", 12),
    ("af13", 14),
    ("af21", 18),
    ("af22", 20),
    ("af23", 22),
    ("af31", 26),
    ("af32", 28),
    ("af33", 30),
    ("af41", 34),
    ("af42", 36),
    ("af43", 38),
    ("ef", 46),
    ("va", 44),
    ("le", 1),
];

impl Dscp {
    /// The highest value six bits hold.
    pub const MAX: u8 = 63;

    /// `v` as a DSCP, if it fits six bits.
    pub fn new(v: u8) -> Option<Dscp> {
        (v <= Self::MAX).then_some(Dscp(v))
    }

    pub fn value(self) -> u8 {
        self.0
    }

    /// The IPv4 TOS byte (and the IPv6 traffic class) carrying this DSCP
    /// with the ECN bits 0 (not ECN-capable): what IP_TOS and IPV6_TCLASS
    /// are set to and what frame-building engines write.
    pub fn tos(self) -> u8 {
        self.0 << 2
    }

    /// The DSCP of a TOS byte or traffic class (its ECN bits dropped).
    pub fn of_tos(tos: u8) -> Dscp {
        Dscp(tos >> 2)
    }

    /// The PHB name of this value, if it has one.
    pub fn name(self) -> Option<&'static str> {
        NAMES.iter().find(|(_, v)| *v == self.0).map(|(n, _)| *n)
    }
}

/// `ef (46)`, or the bare number of a value without a name.
impl fmt::Display for Dscp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({})", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

impl From<Dscp> for u8 {
    fn from(d: Dscp) -> u8 {
        d.0
    }
}

impl TryFrom<u8> for Dscp {
    type Error = DscpError;
    fn try_from(v: u8) -> Result<Dscp, DscpError> {
        Dscp::new(v).ok_or_else(|| DscpError(v.to_string()))
    }
}

/// A string that is no DSCP; the message lists what is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DscpError(pub String);

impl fmt::Display for DscpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.0;
        write!(f, "'{s}' is not a DSCP: ")?;
        match s.trim().parse::<u32>() {
            // A TOS byte (iperf3 -S, ping -Q) holds the DSCP shifted by two.
            Ok(n @ 64..=255) if n % 4 == 0 => write!(
                f,
                "a DSCP is 6 bits, 0..63; {n} looks like a TOS byte, whose DSCP is {}",
                Dscp((n >> 2) as u8)
            ),
            Ok(_) => write!(f, "a DSCP is 6 bits, 0..63"),
            Err(_) => write!(
                f,
                "give 0..63 or a name: cs0..cs7, af11..af43 (af11 af12 af13 af21 .. af41 af42 \
                 af43), ef (46), va (44) or le (1)"
            ),
        }
    }
}

impl std::error::Error for DscpError {}

impl std::str::FromStr for Dscp {
    type Err = DscpError;
    fn from_str(s: &str) -> Result<Dscp, DscpError> {
        let t = s.trim().to_ascii_lowercase();
        let err = || DscpError(s.to_string());
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            return t.parse::<u8>().ok().and_then(Dscp::new).ok_or_else(err);
        }
        NAMES
            .iter()
            .find(|(n, _)| *n == t)
            .map(|(_, v)| Dscp(*v))
            .ok_or_else(err)
    }
}

impl JsonSchema for Dscp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Dscp".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A DSCP value (RFC 2474): the upper six bits of the IPv4 TOS byte and the IPv6 traffic class.",
            "type": "integer",
            "minimum": 0,
            "maximum": 63
        })
    }
}

/// Frames per DSCP value as JSON writes them: an object keyed by the
/// value as a string (`{"46": 1000}`). Read through this, not serde's
/// own map of `u8` keys, which fails inside an internally tagged enum
/// (the agent's `Response`): serde buffers the content and the keys stay
/// strings. `#[serde(with = "crate::dscp::counts")]` on a
/// `BTreeMap<u8, u64>`.
pub mod counts {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(m: &BTreeMap<u8, u64>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(m.iter().map(|(k, v)| (k.to_string(), v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<u8, u64>, D::Error> {
        BTreeMap::<String, u64>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| match k.parse::<u8>() {
                Ok(n) if n <= super::Dscp::MAX => Ok((n, v)),
                _ => Err(D::Error::custom(format!(
                    "'{k}' is not a DSCP value (0..63) in a count per DSCP"
                ))),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Result<u8, DscpError> {
        s.parse::<Dscp>().map(Dscp::value)
    }

    #[test]
    fn names_and_numbers() {
        assert_eq!(d("ef"), Ok(46));
        assert_eq!(d("EF"), Ok(46), "case-insensitive");
        assert_eq!(d(" Af11 "), Ok(10));
        assert_eq!(d("af43"), Ok(38));
        assert_eq!(d("af22"), Ok(20));
        assert_eq!(d("cs0"), Ok(0));
        assert_eq!(d("cs7"), Ok(56));
        assert_eq!(d("cs5"), Ok(40));
        assert_eq!(d("va"), Ok(44));
        assert_eq!(d("le"), Ok(1));
        assert_eq!(d("0"), Ok(0));
        assert_eq!(d("63"), Ok(63));
        assert_eq!(d("046"), Ok(46));
        // Every AF class and drop precedence: 8 * class + 2 * precedence.
        for class in 1..=4u8 {
            for prec in 1..=3u8 {
                assert_eq!(d(&format!("af{class}{prec}")), Ok(8 * class + 2 * prec));
            }
        }
        for i in 0..=7u8 {
            assert_eq!(d(&format!("cs{i}")), Ok(8 * i));
        }
    }

    #[test]
    fn bad_values_say_what_is_valid() {
        for bad in [
            "64", "256", "-1", "", "af14", "af51", "cs8", "efx", "0x2e", "4 6",
        ] {
            let e = bad.parse::<Dscp>().unwrap_err().to_string();
            assert!(e.contains("is not a DSCP"), "{bad}: {e}");
            assert!(e.contains("0..63"), "{bad}: {e}");
        }
        let e = "nope".parse::<Dscp>().unwrap_err().to_string();
        assert!(
            e.contains("cs0..cs7") && e.contains("af11..af43") && e.contains("ef (46)"),
            "{e}"
        );
        // A TOS byte given by mistake is recognised and translated.
        let e = "184".parse::<Dscp>().unwrap_err().to_string();
        assert!(e.contains("TOS byte, whose DSCP is ef (46)"), "{e}");
    }

    #[test]
    fn tos_byte_and_display() {
        let ef = Dscp::new(46).unwrap();
        assert_eq!(ef.tos(), 0xb8, "EF is TOS 0xb8, ECN bits 0");
        assert_eq!(Dscp::new(10).unwrap().tos(), 0x28);
        assert_eq!(Dscp::new(63).unwrap().tos(), 0xfc);
        assert_eq!(Dscp::of_tos(0xb8), ef);
        assert_eq!(Dscp::of_tos(0xbb), ef, "ECN bits do not change the DSCP");
        assert_eq!(ef.to_string(), "ef (46)");
        assert_eq!(Dscp::new(13).unwrap().to_string(), "13");
        assert_eq!(Dscp::new(64), None);
        // Every name round-trips through its value.
        for (n, v) in NAMES {
            assert_eq!(Dscp::new(v).and_then(Dscp::name), Some(n));
        }
    }

    /// Counts per DSCP survive an internally tagged enum, as the agent's
    /// answers carry them; a key that is no DSCP is refused.
    #[test]
    fn counts_round_trip_inside_a_tagged_enum() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        #[serde(tag = "type")]
        enum Msg {
            Counts {
                #[serde(with = "counts")]
                c: std::collections::BTreeMap<u8, u64>,
            },
        }
        let m = Msg::Counts {
            c: [(10, 5), (46, 1000)].into_iter().collect(),
        };
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, r#"{"type":"Counts","c":{"10":5,"46":1000}}"#);
        assert_eq!(serde_json::from_str::<Msg>(&json).unwrap(), m);
        let bad = r#"{"type":"Counts","c":{"64":1}}"#;
        assert!(serde_json::from_str::<Msg>(bad).is_err());
    }

    #[test]
    fn wire_form_is_the_number_and_is_checked() {
        let ef: Dscp = "ef".parse().unwrap();
        assert_eq!(serde_json::to_string(&ef).unwrap(), "46");
        assert_eq!(serde_json::from_str::<Dscp>("10").unwrap().value(), 10);
        assert!(serde_json::from_str::<Dscp>("64").is_err());
    }
}

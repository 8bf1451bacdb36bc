//! HPACK's Huffman code (RFC 7541, Appendix B), decoding only. The code is
//! canonical: each symbol's code follows from the code lengths alone
//! (codes of one length are consecutive, in symbol order), so the table is
//! the 257 lengths and the decoder works from the first code of each
//! length, built at compile time.

/// Code length in bits of symbols 0..=255 and of EOS (256).
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, //
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, //
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, //
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, //
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, //
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, //
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, //
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, //
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, //
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, //
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, //
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, //
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, //
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, //
    30,
];

const EOS: u16 = 256;
const MAX_LEN: usize = 30;

/// The canonical code's decoding tables: per length, how many codes, the
/// first code, and where its symbols start in `symbols`.
struct Canon {
    count: [u32; MAX_LEN + 1],
    first: [u32; MAX_LEN + 1],
    offset: [u16; MAX_LEN + 1],
    /// Symbols ordered by (length, symbol).
    symbols: [u16; 257],
}

const fn canon() -> Canon {
    let mut count = [0u32; MAX_LEN + 1];
    let mut i = 0;
    while i < 257 {
        count[LENGTHS[i] as usize] += 1;
        i += 1;
    }
    let mut first = [0u32; MAX_LEN + 1];
    let mut offset = [0u16; MAX_LEN + 1];
    let mut code = 0u32;
    let mut at = 0u16;
    let mut len = 1;
    while len <= MAX_LEN {
        first[len] = code;
        offset[len] = at;
        code = (code + count[len]) << 1;
        at += count[len] as u16;
        len += 1;
    }
    let mut symbols = [0u16; 257];
    let mut fill = offset;
    let mut s = 0;
    while s < 257 {
        let l = LENGTHS[s] as usize;
        symbols[fill[l] as usize] = s as u16;
        fill[l] += 1;
        s += 1;
    }
    Canon {
        count,
        first,
        offset,
        symbols,
    }
}

static CANON: Canon = canon();

/// Why a Huffman string is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HuffmanError {
    /// The EOS symbol inside the string.
    Eos,
    /// More than 7 bits of padding, or padding that is not all ones.
    Padding,
}

/// Decodes a Huffman-coded string, appending its octets to `out`.
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let t = &CANON;
    let mut code = 0u32;
    let mut len = 0usize;
    for &byte in src {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> shift) & 1);
            len += 1;
            // The code is complete: every 30-bit sequence ends a symbol,
            // so `len` never passes MAX_LEN.
            let idx = code.wrapping_sub(t.first[len]);
            if idx < t.count[len] {
                let sym = t.symbols[usize::from(t.offset[len]) + idx as usize];
                if sym == EOS {
                    return Err(HuffmanError::Eos);
                }
                out.push(sym as u8);
                code = 0;
                len = 0;
            } else if len >= MAX_LEN {
                return Err(HuffmanError::Eos);
            }
        }
    }
    // What is left is the start of EOS (all ones), at most 7 bits.
    if len > 7 || code != (1u32 << len) - 1 {
        return Err(HuffmanError::Padding);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn text(s: &str) -> String {
        let mut out = Vec::new();
        decode(&hex(s), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn huffman_decodes_rfc7541_examples() {
        // RFC 7541 C.4.1 and C.6.1.
        assert_eq!(text("f1e3c2e5f23a6ba0ab90f4ff"), "www.example.com");
        assert_eq!(text("a8eb10649cbf"), "no-cache");
        assert_eq!(text("6402"), "302");
        assert_eq!(text("aec3771a4b"), "private");
        assert_eq!(
            text("d07abe941054d444a8200595040b8166e082a62d1bff"),
            "Mon, 21 Oct 2013 20:13:21 GMT"
        );
        assert_eq!(
            text("9d29ad171863c78f0b97c8e9ae82ae43d3"),
            "https://www.example.com"
        );
        assert_eq!(text(""), "");
    }

    #[test]
    fn huffman_refuses_bad_padding_and_eos() {
        let mut out = Vec::new();
        // "3" is 011001 (6 bits): padding of zeros is wrong.
        assert_eq!(decode(&[0b0110_0100], &mut out), Err(HuffmanError::Padding));
        // A whole byte of ones after a full symbol: 8 bits of padding.
        assert_eq!(decode(&hex("6402ff"), &mut out), Err(HuffmanError::Padding));
        // EOS itself: 30 ones.
        assert_eq!(decode(&[0xff; 4], &mut out), Err(HuffmanError::Eos));
    }

    #[test]
    fn huffman_table_is_a_complete_code() {
        // Kraft's sum of a complete prefix code is exactly one.
        let sum: u64 = LENGTHS.iter().map(|&l| 1u64 << (30 - l)).sum();
        assert_eq!(sum, 1 << 30);
    }
}

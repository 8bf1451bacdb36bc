//! Tests of HPACK: the request block, the dynamic table and the decoder.

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

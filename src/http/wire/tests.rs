//! Tests of the HTTP/1.1 wire details: request heads, Range, status lines, paths.

use super::*;

#[test]
fn requests() {
    let r = parse_request(b"GET /a HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9\r\n\r\n").unwrap();
    assert_eq!(r.target, "/a");
    assert!(r.keep_alive && !r.head);
    assert_eq!(r.range.as_deref(), Some("bytes=0-9"));
    assert_eq!(
        parse_request(b"GET /a HTTP/1.1\r\nHo"),
        Err(Reject::Partial)
    );
    assert_eq!(parse_request(b"GARBAGE\r\n\r\n"), Err(Reject::Status(400)));
    assert_eq!(
        parse_request(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        Err(Reject::Http2)
    );
    // SETTINGS (empty), then GOAWAY: last stream 0, HTTP_1_1_REQUIRED.
    let r = http2_refusal();
    assert_eq!(r[..9], [0, 0, 0, 4, 0, 0, 0, 0, 0]);
    let len = u32::from_be_bytes([0, r[9], r[10], r[11]]) as usize;
    assert_eq!((r[12], r.len()), (7, 18 + len));
    assert_eq!(r[18..26], [0, 0, 0, 0, 0, 0, 0, 0xd]);
    assert!(std::str::from_utf8(&r[26..])
        .unwrap()
        .contains("HTTP/1.1 only"));
    assert_eq!(
        parse_request(b"TRACE / HTTP/1.1\r\nHost: x\r\n\r\n"),
        Err(Reject::Status(405))
    );
    let post = parse_request(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(
        post.map(|r| (r.head, r.body)),
        Ok((false, RequestBody::Length(3)))
    );
    assert_eq!(
        parse_request(b"GET / HTTP/1.1\r\n\r\n"),
        Err(Reject::Status(400))
    );
    let c = parse_request(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    assert!(!c.keep_alive);
    assert_eq!(c.body, RequestBody::Length(0));
    let big = format!("GET / HTTP/1.1\r\nHost: x\r\nX: {}", "a".repeat(MAX_HEAD));
    assert_eq!(parse_request(big.as_bytes()), Err(Reject::Status(431)));
    let mut many = String::from("GET / HTTP/1.1\r\nHost: x\r\n");
    for i in 0..100 {
        many.push_str(&format!("X{i}: y\r\n"));
    }
    many.push_str("\r\n");
    assert_eq!(parse_request(many.as_bytes()), Err(Reject::Status(431)));
}

#[test]
fn request_bodies_are_framed_once() {
    use RequestBody::*;
    let get = |h: &str| parse_request(format!("GET / HTTP/1.1\r\nHost: x\r\n{h}\r\n").as_bytes());
    assert_eq!(get("Content-Length: 12\r\n").unwrap().body, Length(12));
    assert_eq!(get("Content-Length: 5, 5\r\n").unwrap().body, Length(5));
    assert_eq!(
        get("Content-Length: 5\r\nContent-Length: 6\r\n"),
        Err(Reject::Status(400))
    );
    assert_eq!(get("Content-Length: 5, 6\r\n"), Err(Reject::Status(400)));
    assert_eq!(get("Content-Length: -1\r\n"), Err(Reject::Status(400)));
    assert_eq!(get("Content-Length: +1\r\n"), Err(Reject::Status(400)));
    assert_eq!(
        get("Content-Length: 99999999999999999999999\r\n"),
        Err(Reject::Status(400))
    );
    // Transfer codings: chunked alone is read; anything else refused.
    let te = |v: &str| get(&format!("Transfer-Encoding: {v}\r\n")).map(|r| r.body);
    assert_eq!(te("chunked"), Ok(Chunked));
    assert_eq!(te(" Chunked "), Ok(Chunked));
    assert_eq!(te("chunked,"), Ok(Chunked), "empty list elements");
    assert_eq!(te("gzip, chunked"), Err(Reject::Status(501)));
    assert_eq!(
        get("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"),
        Err(Reject::Status(501)),
        "two fields are one list"
    );
    for bad in ["gzip", "chunked, gzip", "identity", "chunked, chunked", ""] {
        assert_eq!(te(bad), Err(Reject::Status(400)), "{bad:?}");
    }
    assert_eq!(
        te("chunked, gzip, chunked"),
        Err(Reject::Status(400)),
        "chunked twice"
    );
    assert_eq!(
        get("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n"),
        Err(Reject::Status(400))
    );
    assert_eq!(
        parse_request(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Err(Reject::Status(400)),
        "HTTP/1.0 has no transfer codings"
    );
    let over = format!("Content-Length: {}\r\n", MAX_REQUEST_BODY + 1);
    assert_eq!(get(&over), Err(Reject::Status(413)));
}

#[test]
fn ranges() {
    use RangeAsk::*;
    assert_eq!(parse_range(None, 100), Whole);
    assert_eq!(
        parse_range(Some("bytes=0-9"), 100),
        Part { start: 0, end: 9 }
    );
    assert_eq!(
        parse_range(Some("bytes=90-"), 100),
        Part { start: 90, end: 99 }
    );
    assert_eq!(
        parse_range(Some("bytes=90-200"), 100),
        Part { start: 90, end: 99 }
    );
    assert_eq!(
        parse_range(Some("bytes=-10"), 100),
        Part { start: 90, end: 99 }
    );
    assert_eq!(
        parse_range(Some("bytes=-1000"), 100),
        Part { start: 0, end: 99 }
    );
    assert_eq!(parse_range(Some("bytes=100-"), 100), Unsatisfiable);
    assert_eq!(parse_range(Some("bytes=-0"), 100), Unsatisfiable);
    assert_eq!(parse_range(Some("bytes=0-1,5-6"), 100), Whole);
    assert_eq!(parse_range(Some("bytes=9-1"), 100), Whole);
    assert_eq!(parse_range(Some("items=0-1"), 100), Whole);
}

#[test]
fn paths_stay_inside_the_root() {
    let dir = std::env::temp_dir().join(format!("lr-wire-{}", std::process::id()));
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/f"), b"x").unwrap();
    std::fs::write(dir.join("secret"), b"s").unwrap();
    std::os::unix::fs::symlink(dir.join("secret"), root.join("out")).unwrap();
    std::os::unix::fs::symlink(root.join("sub/f"), root.join("in")).unwrap();
    let root = root.canonicalize().unwrap();
    assert!(resolve(&root, "/sub/f").is_ok());
    assert!(resolve(&root, "/sub/./f?x=1").is_ok());
    assert!(resolve(&root, "/in").is_ok());
    assert_eq!(resolve(&root, "/../secret"), Err(403));
    assert_eq!(resolve(&root, "/sub/../../secret"), Err(403));
    assert_eq!(resolve(&root, "/%2e%2e/secret"), Err(403));
    assert_eq!(resolve(&root, "/out"), Err(403));
    assert_eq!(resolve(&root, "/etc/passwd"), Err(404));
    assert_eq!(resolve(&root, "etc/passwd"), Err(400));
    assert_eq!(resolve(&root, "/a%00b"), Err(400));
    assert_eq!(resolve(&root, "/sub"), Err(404));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn responses() {
    let r = parse_response(b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\n\r\nxx")
        .unwrap()
        .unwrap();
    assert_eq!(
        (r.status, r.body, r.keep_alive),
        (206, ResponseBody::Length(10), true)
    );
    assert_eq!(parse_response(b"HTTP/1.1 200 OK\r\n").unwrap(), None);
    let body = |h: &str| {
        parse_response(format!("HTTP/1.1 200 OK\r\n{h}\r\n").as_bytes())
            .map(|r| r.map(|r| r.body))
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        body("Transfer-Encoding: chunked\r\n"),
        Ok(Some(ResponseBody::Chunked))
    );
    assert_eq!(
        body("Transfer-Encoding: gzip, chunked\r\n"),
        Ok(Some(ResponseBody::Chunked))
    );
    // Codings without chunked last, or no framing: read to the close.
    assert_eq!(
        body("Transfer-Encoding: gzip\r\n"),
        Ok(Some(ResponseBody::UntilClose))
    );
    assert_eq!(body(""), Ok(Some(ResponseBody::UntilClose)));
    assert_eq!(
        body("Transfer-Encoding: identity\r\nContent-Length: 3\r\n"),
        Ok(Some(ResponseBody::Length(3)))
    );
    assert!(body("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n")
        .unwrap_err()
        .contains("both Transfer-Encoding and Content-Length"));
    assert!(body("Transfer-Encoding: chunked, chunked\r\n")
        .unwrap_err()
        .contains("chunked twice"));
    let e = error_response(404, false);
    let p = parse_response(&e).unwrap().unwrap();
    assert_eq!((p.status, p.keep_alive), (404, false));
    // Header values without regard to case; `close` as a token.
    let r = parse_response(
        b"HTTP/1.1 200 OK\r\nContent-Length:  7 \r\nConnection: Keep-Alive, CLOSE\r\n\
              Transfer-Encoding: Identity\r\n\r\n",
    )
    .unwrap()
    .unwrap();
    assert_eq!((r.body, r.keep_alive), (ResponseBody::Length(7), false));
    let r =
        parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
    assert!(r.keep_alive);
    let r = parse_response(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(!r.keep_alive, "HTTP/1.0 closes unless it says otherwise");
    assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
}

//! What the download client sends and when (no I/O): `--header` values
//! checked before anything runs, `--body`/`--body-file` read and capped,
//! the HTTP/1.1 request built once per event loop, and `--ramp-connections`
//! stages with the connections they ask for at a moment of the run.

use crate::proto::http::{HttpMethod, HttpRequest, RampStage};
use std::path::Path;
use std::time::Duration;

/// Why a `--header`, a body or `--ramp-connections` cannot be used; the
/// message names the flag and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(pub String);

impl From<String> for RequestError {
    fn from(s: String) -> Self {
        RequestError(s)
    }
}

/// The largest request body `--body`/`--body-file` takes: it travels to
/// the client's agent in a control message, and linerate's server reads
/// bodies up to 1 MiB.
pub const MAX_BODY: usize = 64 << 10;
/// The most stages `--ramp-connections` takes.
const MAX_STAGES: usize = 64;
/// The most connections a stage may ask for (as `-c`).
const MAX_CONNECTIONS: u16 = 1024;

/// Headers the client writes itself: another value would break the
/// request's framing or its connection handling.
const FRAMING: [(&str, &str); 5] = [
    (
        "host",
        "the client sends the target's Host (HTTP/2: :authority) itself",
    ),
    (
        "content-length",
        "the client sets it from --body/--body-file",
    ),
    (
        "transfer-encoding",
        "the client sends bodies with a Content-Length, never chunked",
    ),
    (
        "connection",
        "the client keeps connections alive and manages them itself",
    ),
    ("te", "a transfer coding the client would have to decode"),
];

/// A `--header 'Name: value'`: a token name (RFC 9110 5.1), a value
/// without CR, LF or NUL, and not a header that frames the request.
pub fn parse_header(s: &str) -> Result<(String, String), RequestError> {
    let Some((name, value)) = s.split_once(':') else {
        return Err(RequestError(format!(
            "'{s}': write the header as 'Name: value'"
        )));
    };
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(tchar) {
        return Err(RequestError(format!(
            "'{name}' is not a header name: use letters, digits and !#$%&'*+-.^_`|~ only, \
             with no space before the colon"
        )));
    }
    if value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(RequestError(format!(
            "the value of {name} holds a CR, LF or NUL, which would end the header early \
             (request smuggling); give a value on one line"
        )));
    }
    if let Some((_, why)) = FRAMING.iter().find(|(n, _)| name.eq_ignore_ascii_case(n)) {
        return Err(RequestError(format!(
            "{name} cannot be set with --header: {why}"
        )));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// The request of every download: `--method`, `--header`s and a body from
/// `--body` or `--body-file`, capped at [`MAX_BODY`].
pub fn request(
    method: HttpMethod,
    headers: &[(String, String)],
    body: Option<&str>,
    body_file: Option<&Path>,
) -> Result<HttpRequest, RequestError> {
    let body = match (body, body_file) {
        (Some(b), _) => b.as_bytes().to_vec(),
        (None, Some(p)) => {
            let len = std::fs::metadata(p)
                .map_err(|e| format!("--body-file {}: {e}", p.display()))?
                .len();
            if len > MAX_BODY as u64 {
                return Err(body_too_big(len));
            }
            std::fs::read(p).map_err(|e| format!("--body-file {}: {e}", p.display()))?
        }
        (None, None) => Vec::new(),
    };
    if body.len() > MAX_BODY {
        return Err(body_too_big(body.len() as u64));
    }
    if !body.is_empty() && matches!(method, HttpMethod::Get | HttpMethod::Head) {
        return Err(RequestError(format!(
            "--body with --method {method}: a {method} request has no body (servers may ignore \
             or refuse it); use --method POST or PUT"
        )));
    }
    Ok(HttpRequest {
        method,
        headers: headers.to_vec(),
        body,
    })
}

fn body_too_big(len: u64) -> RequestError {
    RequestError(format!(
        "a request body of {len} bytes: linerate sends bodies up to {} KiB (it measures what \
         servers answer, not uploads); give a smaller --body/--body-file, or measure uploads \
         with `linerate tcp`",
        MAX_BODY >> 10
    ))
}

/// The HTTP/1.1 request, head and body, built once: every request of a
/// run is the same bytes.
pub fn h1_request(r: &HttpRequest, path: &str, host: &str) -> Vec<u8> {
    let mut s = format!(
        "{} {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: linerate/{}\r\nAccept: */*\r\n",
        r.method,
        env!("CARGO_PKG_VERSION")
    );
    for (n, v) in &r.headers {
        s.push_str(&format!("{n}: {v}\r\n"));
    }
    if !r.body.is_empty() || matches!(r.method, HttpMethod::Post | HttpMethod::Put) {
        s.push_str(&format!("Content-Length: {}\r\n", r.body.len()));
    }
    s.push_str("\r\n");
    let mut b = s.into_bytes();
    b.extend_from_slice(&r.body);
    b
}

/// `--ramp-connections`' stages, as one flag value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RampStages(pub Vec<RampStage>);

/// The flag's parser: [`parse_stages`].
pub fn ramp_stages(s: &str) -> Result<RampStages, RequestError> {
    parse_stages(s).map(RampStages)
}

/// `--ramp-connections 10s:1,20s:64,10s:0`: stages of DURATION:CONNECTIONS.
pub fn parse_stages(s: &str) -> Result<Vec<RampStage>, RequestError> {
    let mut stages = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let Some((d, n)) = part.split_once(':') else {
            return Err(RequestError(format!(
                "'{part}': write each stage as DURATION:CONNECTIONS, e.g. 10s:1,20s:64,10s:0"
            )));
        };
        let secs = crate::model::values::parse_secs(d.trim())
            .map_err(|e| format!("stage '{part}': {e}"))?;
        if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
            return Err(RequestError(format!(
                "stage '{part}': a stage lasts more than 0 s and at most a day"
            )));
        }
        let n: u16 = n
            .trim()
            .parse()
            .ok()
            .filter(|&n| n <= MAX_CONNECTIONS)
            .ok_or_else(|| {
                format!("stage '{part}': connections must be a number in 0..={MAX_CONNECTIONS}")
            })?;
        stages.push(RampStage {
            duration_ms: (secs * 1000.0).round().max(1.0) as u64,
            connections: n,
        });
    }
    if stages.len() > MAX_STAGES {
        return Err(RequestError(format!(
            "{} stages: at most {MAX_STAGES}",
            stages.len()
        )));
    }
    if stages.iter().all(|s| s.connections == 0) {
        return Err(RequestError(
            "every stage asks for 0 connections: nothing would run".into(),
        ));
    }
    Ok(stages)
}

/// The stages' whole duration.
pub fn ramp_duration(stages: &[RampStage]) -> Duration {
    Duration::from_millis(stages.iter().map(|s| s.duration_ms).sum())
}

/// The most connections any stage asks for.
pub fn ramp_peak(stages: &[RampStage]) -> u16 {
    stages.iter().map(|s| s.connections).max().unwrap_or(0)
}

/// The connections the stages ask for `t` into the run: linear from the
/// previous stage's target (0 before the first) to the stage's own,
/// rounded down (a stage from 1 to 64 reaches 64 at its end). Past the
/// last stage, its target.
pub fn ramp_target(stages: &[RampStage], t: Duration) -> u16 {
    let mut from = 0u16;
    let mut at = Duration::ZERO;
    for s in stages {
        let len = Duration::from_millis(s.duration_ms);
        if t < at + len {
            let frac = (t - at).as_secs_f64() / len.as_secs_f64();
            let v = f64::from(from) + (f64::from(s.connections) - f64::from(from)) * frac;
            return v.floor().clamp(0.0, f64::from(MAX_CONNECTIONS)) as u16;
        }
        at += len;
        from = s.connections;
    }
    from
}

/// The first moment at or after `t` when connection `id` (0-based) runs,
/// that is the target is above `id`; `None`: never again.
pub fn ramp_next_active(stages: &[RampStage], id: u16, t: Duration) -> Option<Duration> {
    let want = f64::from(id) + 1.0;
    let mut from = 0u16;
    let mut at = Duration::ZERO;
    for s in stages {
        let len = Duration::from_millis(s.duration_ms);
        let end = at + len;
        if end > t {
            let start = t.max(at);
            if ramp_target(stages, start) > id {
                return Some(start);
            }
            let (p, q) = (f64::from(from), f64::from(s.connections));
            if q >= want && q > p {
                // Where the line reaches `want`, a hair later so that the
                // rounding down has reached it too.
                let frac = (want - p) / (q - p);
                let when = at + len.mul_f64(frac.clamp(0.0, 1.0)) + Duration::from_micros(50);
                return Some(when.max(start).min(end));
            }
        }
        at = end;
        from = s.connections;
    }
    (from > id).then_some(t.max(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_checked() {
        assert_eq!(
            parse_header("X-Token: abc def ").unwrap(),
            ("X-Token".into(), "abc def".into())
        );
        assert_eq!(parse_header("Accept:").unwrap().1, "");
        for bad in [
            "NoColon",
            ": v",
            "Bad Name: v",
            "X(y): v",
            "X: a\r\nEvil: 1",
            "X: a\nb",
        ] {
            assert!(parse_header(bad).is_err(), "{bad}");
        }
        for framing in [
            "Host: x",
            "content-length: 5",
            "Transfer-Encoding: chunked",
            "Connection: close",
        ] {
            let e = parse_header(framing).unwrap_err();
            assert!(e.0.contains("cannot be set with --header"), "{e}");
        }
    }

    #[test]
    fn bodies_are_capped_and_need_a_method_with_one() {
        let r = request(HttpMethod::Post, &[], Some("hello"), None).unwrap();
        assert_eq!(r.body, b"hello");
        let big = "x".repeat(MAX_BODY + 1);
        let e = request(HttpMethod::Put, &[], Some(&big), None).unwrap_err();
        assert!(e.0.contains("up to 64 KiB"), "{e}");
        assert!(request(HttpMethod::Get, &[], Some("x"), None).is_err());
        let e = request(
            HttpMethod::Post,
            &[],
            None,
            Some(Path::new("/nonexistent/b")),
        )
        .unwrap_err();
        assert!(e.0.contains("--body-file /nonexistent/b"), "{e}");
    }

    #[test]
    fn the_h1_request_carries_method_headers_and_body() {
        let r = HttpRequest {
            method: HttpMethod::Post,
            headers: vec![("X-A".into(), "1".into())],
            body: b"abc".to_vec(),
        };
        let b = String::from_utf8(h1_request(&r, "/p", "h")).unwrap();
        assert!(b.starts_with("POST /p HTTP/1.1\r\nHost: h\r\n"), "{b}");
        assert!(
            b.contains("\r\nX-A: 1\r\nContent-Length: 3\r\n\r\nabc"),
            "{b}"
        );
        let g = String::from_utf8(h1_request(&HttpRequest::default(), "/", "h")).unwrap();
        assert!(
            g.starts_with("GET / ") && !g.contains("Content-Length"),
            "{g}"
        );
    }

    #[test]
    fn stages_parse_and_ramp_linearly() {
        let s = parse_stages("10s:1, 20s:64,10s:0").unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(ramp_duration(&s), Duration::from_secs(40));
        assert_eq!(ramp_peak(&s), 64);
        let at = |secs: f64| ramp_target(&s, Duration::from_secs_f64(secs));
        assert_eq!(at(0.0), 0);
        assert_eq!(at(5.0), 0);
        assert_eq!(at(9.99), 0);
        assert_eq!(at(10.0), 1);
        assert_eq!(at(20.0), 32); // 1 + 63 * 0.5 = 32.5, rounded down
        assert_eq!(at(30.0), 64);
        assert_eq!(at(35.0), 32);
        assert_eq!(at(40.0), 0);
        for bad in ["", "10s", "x:1", "0s:4", "10s:-1", "10s:2000", "5s:0,5s:0"] {
            assert!(parse_stages(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn connections_wake_when_the_ramp_reaches_them() {
        let s = parse_stages("2s:1,2s:8,1s:0").unwrap();
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis());
        // Connection 0 runs once the first stage's line reaches 1: at 2 s.
        assert_eq!(ms(ramp_next_active(&s, 0, Duration::ZERO)), Some(2000));
        // Connection 7 at the end of the second stage.
        assert_eq!(ms(ramp_next_active(&s, 7, Duration::ZERO)), Some(4000));
        // Connection 3 (the 4th) when 1 + 7 f reaches 4: f = 3/7.
        let t = ramp_next_active(&s, 3, Duration::ZERO).unwrap();
        assert!(ramp_target(&s, t) > 3, "{t:?}");
        assert!(ramp_target(&s, t - Duration::from_millis(1)) <= 3, "{t:?}");
        // Already running: now.
        assert_eq!(
            ms(ramp_next_active(&s, 0, Duration::from_millis(3000))),
            Some(3000)
        );
        // Past the peak, on the way down: never again.
        assert_eq!(ramp_next_active(&s, 7, Duration::from_millis(4100)), None);
        let flat = parse_stages("1s:2").unwrap();
        assert_eq!(
            ms(ramp_next_active(&flat, 1, Duration::from_secs(5))),
            Some(5000)
        );
    }
}

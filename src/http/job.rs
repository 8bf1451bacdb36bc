//! The HTTP jobs as an agent runs them: set-up that must answer at once
//! (bind, certificate), then the data plane on the job's thread.

use super::client::{self, GetSpec};
use super::server::{ServeSpec, Server};
use super::tls;
use super::HttpError;
use crate::engine::JobCtx;
use crate::proto::http::{HttpGetJob, HttpServeJob};
use crate::proto::EndpointSummary;
use std::time::{Duration, Instant};

pub fn open_server(ctx: &JobCtx, j: &HttpServeJob) -> Result<(Server, u16), HttpError> {
    let spec = ServeSpec {
        content: j.content.clone(),
        tls: j.tls.then_some(None),
        ktls: j.ktls,
        cold: j.cold,
        request_timeout: Duration::from_millis(j.request_timeout_ms.max(100)),
        names: vec!["localhost".into(), j.bind.ip().to_string()],
        congestion: j.congestion.clone(),
    };
    let server = Server::bind(j.bind, &spec, ctx.stop.clone())?;
    if let Some(d) = j.dscp {
        server.mark(d).map_err(HttpError::io(format!(
            "marking the server's packets with DSCP {d}"
        )))?;
    }
    let port = server
        .local_addr()
        .map_err(HttpError::io("reading the server's port"))?
        .port();
    Ok((server, port))
}

/// Serves until the controller stops the job (or `cap` passes).
pub fn serve(ctx: &JobCtx, server: Server, cap: Duration) -> EndpointSummary {
    let cpu0 = crate::sys::process_cpu_seconds();
    let until = Instant::now() + cap + Duration::from_secs(60);
    let s = server.run(Some(until), ctx.interval, &mut |iv| ctx.emit(iv));
    EndpointSummary {
        elapsed_s: s.elapsed_s,
        cpu_s: crate::sys::process_cpu_seconds() - cpu0,
        max_rss_bytes: crate::sys::peak_rss_bytes(),
        tx_bytes: s.body_bytes,
        streams: vec![],
        http: Some(Box::new(s)),
        ..Default::default()
    }
}

pub fn get_spec(j: &HttpGetJob, duration: Duration) -> Result<GetSpec, HttpError> {
    let tls = match &j.tls {
        None => None,
        Some(trust) if j.http2 => {
            // HTTP/2 over TLS is agreed in the handshake (ALPN h2).
            let mut c = (*tls::client_config(trust, false)?).clone();
            c.alpn_protocols = vec![b"h2".to_vec()];
            Some(std::sync::Arc::new(c))
        }
        Some(trust) => Some(tls::client_config(trust, j.ktls)?),
    };
    if j.http2 && j.ktls {
        return Err(HttpError::Config(
            "HTTP/2 with kTLS: not supported; leave out --ktls".into(),
        ));
    }
    if !j.path.starts_with('/') {
        return Err(HttpError::Config(format!(
            "HTTP path '{}' must start with /",
            j.path
        )));
    }
    // A plan's job is checked as the command line's flags are.
    for (n, v) in &j.request.headers {
        super::request::parse_header(&format!("{n}: {v}")).map_err(|e| HttpError::Config(e.0))?;
    }
    if j.request.body.len() > super::request::MAX_BODY {
        return Err(HttpError::Config(format!(
            "a request body of {} bytes: at most {} bytes",
            j.request.body.len(),
            super::request::MAX_BODY
        )));
    }
    let connections = if j.ramp.is_empty() {
        j.connections.max(1)
    } else {
        super::request::ramp_peak(&j.ramp).max(1)
    };
    Ok(GetSpec {
        target: j.target,
        host: j.host.clone(),
        path: j.path.clone(),
        tls,
        ktls: j.ktls,
        connections,
        duration,
        requests: j.requests,
        rate_per_s: j.rate_per_s,
        http2: j.http2,
        dscp: j.dscp,
        request: j.request.clone(),
        ramp: j.ramp.clone(),
    })
}

pub fn get(ctx: &JobCtx, spec: GetSpec) -> Result<EndpointSummary, HttpError> {
    let cpu0 = crate::sys::process_cpu_seconds();
    let s = client::run(spec, ctx.stop.clone(), ctx.interval, &mut |iv| ctx.emit(iv))?;
    Ok(EndpointSummary {
        elapsed_s: s.elapsed_s,
        cpu_s: crate::sys::process_cpu_seconds() - cpu0,
        max_rss_bytes: crate::sys::peak_rss_bytes(),
        rx_bytes: s.body_bytes,
        http: Some(Box::new(s)),
        ..Default::default()
    })
}

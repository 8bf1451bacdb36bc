//! The iperf3 client as an agent job (`Job::Iperf3Client`): the
//! conversation runs where the agent runs (this host, a namespace, an ssh
//! host), so the controller's endpoints work against iperf3 servers as
//! they do against linerate's own. The agent hands back this end's
//! counters as any job does, its intervals, and in the summary the
//! streams' totals and the server's own figures.

use super::client::{self, ClientConfig};
use super::data::Live;
use super::Iperf3Error;
use crate::engine::JobCtx;
use crate::proto::iperf3::{ClientJob, ClientReport};
use crate::proto::EndpointSummary;
use std::time::Duration;

/// The job's test, checked as a server would check it: a controller is
/// not trusted to have sent a valid one.
pub fn config(j: &ClientJob) -> Result<ClientConfig, Iperf3Error> {
    let params = j.params.validate().map_err(|r| {
        Iperf3Error::Rejected(format!(
            "the iperf3 test parameters are not valid: {}",
            r.message
        ))
    })?;
    if j.answer_timeout_ms == 0 {
        return Err(Iperf3Error::Rejected(
            "the iperf3 answer timeout is 0 ms".into(),
        ));
    }
    Ok(ClientConfig {
        server: j.server,
        params,
        cpus: j.cpus.clone(),
        answer_timeout: Duration::from_millis(j.answer_timeout_ms),
        live: None,
        cookie: None,
    })
}

/// Runs the test; its intervals reach the controller as they are
/// measured. A test that the server ended (or that stopped answering)
/// after streams ran is not an error here: its partial figures come back
/// with `lost` set, and the controller keeps them.
pub fn run(ctx: &JobCtx, cfg: &ClientConfig) -> Result<EndpointSummary, Iperf3Error> {
    // Drawn here and reported, so a linerate server's count of this
    // test can be found by it.
    let cookie = client::new_cookie()?;
    let cfg = ClientConfig {
        live: Some(Live {
            test: ctx.test,
            out: ctx.out.clone(),
        }),
        cookie: Some(cookie),
        ..cfg.clone()
    };
    let (outcome, lost) = match client::run(&cfg, &ctx.stop) {
        Ok(o) => (o, None),
        Err(Iperf3Error::Lost {
            message,
            partial: Some(o),
        }) => (*o, Some(message)),
        Err(e) => return Err(e),
    };
    let mut summary = outcome.local.summary;
    summary.iperf3 = Some(Box::new(ClientReport {
        streams: outcome.local.streams,
        far: outcome.far,
        lost,
        cookie: Some(super::server::cookie_text(&cookie)),
    }));
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::iperf3::{Mode, TestParams, Transport};

    fn job(p: &TestParams) -> ClientJob {
        ClientJob {
            server: "198.18.0.2:5201".parse().unwrap(),
            params: p.to_wire(),
            cpus: vec![],
            answer_timeout_ms: 10_000,
            allow: vec![],
        }
    }

    #[test]
    fn the_test_survives_the_trip_to_the_agent() {
        let p = TestParams {
            transport: Transport::Udp,
            streams: 4,
            mode: Mode::Bidir,
            time_s: 7.0,
            omit_s: 2.0,
            len: 1472,
            bandwidth_bps: 250_000_000,
            counters_64bit: true,
            congestion: None,
            client_version: Some("linerate".into()),
        };
        let cfg = config(&job(&p)).expect("valid");
        assert_eq!(cfg.params, p);
        assert_eq!(cfg.answer_timeout, Duration::from_secs(10));
    }

    #[test]
    fn an_invalid_test_is_refused_by_the_agent() {
        let mut j = job(&TestParams {
            transport: Transport::Tcp,
            streams: 1,
            mode: Mode::ClientSends,
            time_s: 1.0,
            omit_s: 0.0,
            len: 131_072,
            bandwidth_bps: 0,
            counters_64bit: false,
            congestion: None,
            client_version: None,
        });
        j.params.parallel = 500.0;
        let e = config(&j).unwrap_err().to_string();
        assert!(e.contains("500 parallel streams"), "{e}");
        j.params.parallel = 1.0;
        j.answer_timeout_ms = 0;
        assert!(config(&j).is_err());
    }
}

//! Many iperf3 clients against linerate's own iperf3 server (a plan's
//! `iperf3_server` host, seed 004's twelve generators at one server): the
//! server runs as a job on the sink's agent, every generator (and each of
//! its instances) runs the iperf3 client job at once, and each client's
//! result, recorded as against a stock server, gets the server's own count
//! of its test beside it (found by the client's cookie), cross-checked.

use super::iperf3::{kernel_check, params_of, record};
use super::jobs::{collect, collect_stopped, Collected, Jobs};
use super::record as counters;
use super::setup::{cut_short, finish_test, next_id, Ends, Leg, OnProgress, Progress};
use crate::iperf3::{Measured, Outcome};
use crate::model::error::{chain, Step};
use crate::proto::iperf3::{ClientReport, ServedTest, ServerJob, ServerReport, StreamTotals};
use crate::proto::{IntervalSample, Job};
use crate::results::{CrossCheck, RunDir, TestResult, TestStatus};
use crate::runner::error::RunnerError;
use crate::runner::error::{err, fail, Result};
use crate::topology::Addressing;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One client: its generator's agent, its name in results, its job id.
struct Client {
    agent: usize,
    label: String,
    id: u32,
    /// Why it did not start, if it did not.
    failed: Option<String>,
}

/// Runs `t` from every generator and instance of `ends` at once against
/// `server`, started first on the sink's agent; one result per client,
/// named "TEST HOST" ("TEST HOST/2" for a second instance).
pub fn run_iperf3_served(
    ends: &mut Ends,
    t: &super::Iperf3Test,
    server: &ServerJob,
    dir: Option<&mut RunDir>,
    on_progress: OnProgress,
) -> Vec<TestResult> {
    let started = crate::model::clock::now_rfc3339();
    let mut results = Vec::new();
    let failed = finish_test(
        TestResult::new(&t.name, started.clone(), params_of(&t.params)),
        |_| served_inner(ends, t, server, dir, on_progress, &started, &mut results),
    );
    if failed.status != TestStatus::Ok {
        results.push(failed);
    }
    results
}

fn served_inner(
    ends: &mut Ends,
    t: &super::Iperf3Test,
    server: &ServerJob,
    mut dir: Option<&mut RunDir>,
    on_progress: OnProgress,
    started: &str,
    results: &mut Vec<TestResult>,
) -> Result<()> {
    let sink = ends.sink.agent;
    let host = ends.role(sink);
    let instances = ends.instances.max(1);
    let agents = ends.agents();
    let mut clients = Vec::new();
    for g in &ends.gens {
        let role = ends.role(g.agent);
        for i in 1..=instances {
            clients.push(Client {
                agent: g.agent,
                label: if instances > 1 {
                    format!("{role}/{i}")
                } else {
                    role.clone()
                },
                id: next_id(),
                failed: None,
            });
        }
    }
    let mut jobs = Jobs::new(ends.fleet);
    let before = jobs.snapshot(&agents)?;
    let sid = next_id();
    jobs.start(sink, sid, Job::Iperf3Server(Box::new(server.clone())), None)
        .map_err(|e| {
            Step::new(
                format!(
                    "starting linerate's iperf3 server on host {host} ({}; an agent older than \
                     this linerate does not know this job: install the same version there)",
                    server.listen
                ),
                e,
            )
        })?;
    for c in &mut clients {
        if let Err(e) = jobs.start(
            c.agent,
            c.id,
            Job::Iperf3Client(Box::new(t.job.clone())),
            None,
        ) {
            c.failed = Some(chain(&e));
        }
    }
    let ids: Vec<u32> = clients
        .iter()
        .filter(|c| c.failed.is_none())
        .map(|c| c.id)
        .collect();
    let whole = t.params.time_s + t.params.omit_s;
    let answer = Duration::from_millis(t.job.answer_timeout_ms);
    let deadline = jobs.fleet.now() + Duration::from_secs_f64(whole) + answer * 3;
    let mut col = Collected::new(dir.as_deref().map(|d| d.path.as_path()));
    let mut live: HashMap<u32, (f64, f64)> = HashMap::new();
    let label_of: HashMap<u32, String> = clients.iter().map(|c| (c.id, c.label.clone())).collect();
    let mut progress = |id: u32, s: &IntervalSample, _: Instant| {
        if let (Some(d), Some(l)) = (dir.as_deref_mut(), label_of.get(&id)) {
            d.log_interval(&t.name, l, s);
        }
        let span = (s.t_end - s.t_start).max(1e-6);
        live.insert(
            id,
            (
                s.tx_bytes as f64 * 8.0 / span,
                s.rx_bytes as f64 * 8.0 / span,
            ),
        );
        on_progress(&Progress {
            test: t.name.clone(),
            elapsed_s: s.t_end,
            duration_s: whole,
            tx_bps: live.values().map(|v| v.0).sum(),
            rx_bps: live.values().map(|v| v.1).sum(),
            ..Default::default()
        });
    };
    let done = collect(jobs.fleet, &mut col, &ids, deadline, &mut progress)?;
    if !done {
        for c in &clients {
            jobs.stop(c.agent, c.id, vec![]);
        }
        let by = jobs.fleet.now() + answer + Duration::from_secs(5);
        collect_stopped(jobs.fleet, &mut col, &ids, by, &mut progress)?;
    }
    // Every client has ended: the server's tests end with them.
    jobs.stop(sink, sid, vec![]);
    let by = jobs.fleet.now() + answer + Duration::from_secs(5);
    collect_stopped(jobs.fleet, &mut col, &[sid], by, |_, _, _| {})?;
    let after = jobs.snapshot(&agents)?;
    jobs.disarm();
    let report = match col.failed.get(&sid) {
        Some(e) => Err(format!(
            "linerate's iperf3 server on host {host} failed: {e}"
        )),
        None => col
            .finished
            .get_mut(&sid)
            .and_then(|s| s.iperf3_served.take())
            .map(|r| *r)
            .ok_or_else(|| {
                format!("linerate's iperf3 server on host {host} did not report its tests in time")
            }),
    };
    let far_role = format!("linerate iperf3 server on {host} (far end)");
    let one_per_host = instances == 1;
    for (i, c) in clients.iter().enumerate() {
        let first = i == 0;
        let mut r = TestResult::new(
            &format!("{} {}", t.name, c.label),
            started.to_string(),
            params_of(&t.params),
        );
        let why = c.failed.clone().or_else(|| col.failed.get(&c.id).cloned());
        let body = |r: &mut TestResult| -> Result<()> {
            if let Some(e) = why {
                let busy = report.as_ref().is_ok_and(|s| s.busy > 0) && e.contains("busy");
                return Err(RunnerError::Failed(if busy {
                    format!(
                        "{} was refused as busy by linerate's iperf3 server on {host} \
                         (max_clients {}: every slot was taken): {e}",
                        c.label, server.max_clients
                    )
                } else {
                    format!("{}: {e}", c.label)
                }));
            }
            let mine = one_client(ends, &mut col, c, t, (&far_role, started), r)?;
            let served = report.as_ref().map_err(|e| err!("{e}"))?;
            server_view(
                r,
                &mine.streams,
                served,
                mine.cookie.as_deref(),
                &c.label,
                &host,
            )?;
            if let Some(lost) = mine.lost {
                fail!("{}: {lost}", c.label);
            }
            counters::counters(ends, &before, &after, r);
            let leg = leg_of(c);
            counters::cpu(ends, &before, &after, &col, std::slice::from_ref(&leg), r);
            if first {
                // One verdict for the hosts the clients share, not one each.
                counters::bottleneck(ends, &before, &after, &col, std::slice::from_ref(&leg), r);
            }
            if one_per_host {
                kernel_check(r, &ends.role(c.agent), &far_role);
            }
            if !done {
                fail!("{}", cut_short());
            }
            Ok(())
        };
        if let Err(e) = body(&mut r) {
            r.status = if r.status == TestStatus::Ok {
                TestStatus::Failed
            } else {
                r.status
            };
            r.error = Some(chain(&e));
        }
        r.note_links_down();
        results.push(r);
    }
    Ok(())
}

/// Client `c`'s own result, recorded as against a stock server; its
/// report (stream totals, cookie, why it ended early) for the checks.
fn one_client(
    ends: &Ends,
    col: &mut Collected,
    c: &Client,
    t: &super::Iperf3Test,
    (far_role, started): (&str, &str),
    r: &mut TestResult,
) -> Result<ClientReport> {
    let mut summary = col.summary(c.id);
    let report = summary.iperf3.take().ok_or_else(|| {
        err!(
            "{}: the agent's iperf3 client reported no stream totals: is the linerate on that \
             host older than this one? Install the same version on both",
            c.label
        )
    })?;
    let outcome = Outcome {
        params: t.params.clone(),
        local: Measured {
            summary,
            intervals: col.intervals.take(c.id),
            streams: report.streams.clone(),
        },
        far: report.far.clone(),
    };
    *r = record(&r.name, &outcome, (&c.label, far_role), started.to_string());
    r.params.lab = ends.lab;
    r.params.cpus = t.job.cpus.clone();
    r.cpu.clear();
    Ok(*report)
}

fn leg_of(c: &Client) -> Leg {
    Leg {
        name: c.label.clone(),
        tx_agent: c.agent,
        rx_agent: c.agent,
        tx_id: c.id,
        rx_id: c.id,
        from: Addressing::default(),
        to: Addressing::default(),
        instance: None,
        gen_agent: c.agent,
    }
}

/// Puts the server's count of this client's test (found by `cookie`)
/// beside the client's, and checks each direction's figures against it:
/// what one end sent against what the other counted (TCP: payload bytes;
/// UDP: datagrams sent against the highest sequence number seen). A
/// client the server has no record of is an error: the two disagree on
/// whether the test ran at all.
fn server_view(
    r: &mut TestResult,
    client: &[StreamTotals],
    report: &ServerReport,
    cookie: Option<&str>,
    label: &str,
    host: &str,
) -> Result<()> {
    let Some(cookie) = cookie else {
        fail!(
            "{label}: the agent's iperf3 client did not report its cookie, so the server's count \
             of its test cannot be found: is the linerate on that host older than this one?"
        );
    };
    let Some(served) = report
        .served
        .iter()
        .find(|s| s.cookie.as_deref() == Some(cookie))
    else {
        fail!(
            "linerate's iperf3 server on {host} has no record of {label}'s test ({} other tests \
             served): the client and the server disagree on whether it ran",
            report.served.len()
        );
    };
    let checks = cross_checks(client, served, label);
    r.cross_checks.extend(checks);
    let mut kept = served.clone();
    kept.cookie = None;
    r.server_record = Some(kept);
    if let Some(e) = &served.error {
        fail!("linerate's iperf3 server on {host}, for {label}: {e}");
    }
    Ok(())
}

fn pick(v: &[StreamTotals], sends: bool) -> Vec<&StreamTotals> {
    v.iter().filter(|t| t.sends == sends).collect()
}

/// Each direction's check: what its sender counted sending against what
/// its receiver counted. TCP: payload bytes. UDP: datagrams sent against
/// the highest sequence number the receiver saw (received + lost), so
/// loss on the way is not a disagreement of the counters.
fn cross_checks(client: &[StreamTotals], served: &ServedTest, label: &str) -> Vec<CrossCheck> {
    let udp = served.transport == crate::proto::iperf3::Transport::Udp;
    let count = |s: &[&StreamTotals]| -> u64 {
        s.iter()
            .map(|t| if udp { t.packets } else { t.bytes })
            .sum()
    };
    let unit = if udp { "datagrams" } else { "payload bytes" };
    let mut out = Vec::new();
    for client_sends in [true, false] {
        let (tx, rx) = if client_sends {
            (pick(client, true), pick(&served.streams, false))
        } else {
            (pick(&served.streams, true), pick(client, false))
        };
        if tx.is_empty() && rx.is_empty() {
            continue;
        }
        let counted = if udp {
            "counted by sequence number"
        } else {
            "received"
        };
        let what = if client_sends {
            format!(
                "client_to_server: {unit} {label} sent vs {counted} by the linerate server \
                 (its agent's count)"
            )
        } else {
            format!(
                "server_to_client: {unit} the linerate server sent to {label} (its agent's count) \
                 vs {counted} by {label}"
            )
        };
        out.push(CrossCheck::new(what, count(&tx), count(&rx)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::iperf3::Transport;

    fn totals(sends: bool, bytes: u64, packets: u64) -> StreamTotals {
        StreamTotals {
            id: 1,
            sends,
            bytes,
            packets,
            ..Default::default()
        }
    }

    #[test]
    fn each_direction_is_checked_against_the_servers_count() {
        // The client sent 1000 bytes the server counted 990 of (1 %: not
        // flagged) and received 500 of the 600 the server sent (flagged).
        let served = ServedTest {
            peer: "198.18.0.1:40000".into(),
            transport: Transport::Tcp,
            streams: vec![totals(false, 990, 0), totals(true, 600, 0)],
            ..Default::default()
        };
        let client = [totals(true, 1000, 0), totals(false, 500, 0)];
        let c = cross_checks(&client, &served, "gen1");
        assert_eq!(c.len(), 2);
        assert!(c[0].what.starts_with("client_to_server"), "{}", c[0].what);
        assert!(c[0].what.contains("gen1 sent"), "{}", c[0].what);
        assert_eq!(
            (c[0].application, c[0].kernel, c[0].flagged),
            (1000, 990, false)
        );
        assert_eq!(
            (c[1].application, c[1].kernel, c[1].flagged),
            (600, 500, true)
        );
        // UDP counts datagrams by sequence number; one way only here.
        let udp = ServedTest {
            transport: Transport::Udp,
            streams: vec![totals(false, 0, 100)],
            ..served
        };
        let c = cross_checks(&[totals(true, 140_000, 100)], &udp, "gen2");
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].application, c[0].kernel), (100, 100));
        assert!(c[0].what.contains("datagrams"), "{}", c[0].what);
    }

    #[test]
    fn a_client_the_server_never_saw_is_an_error() {
        let report = ServerReport {
            served: vec![ServedTest {
                cookie: Some("other".into()),
                ..Default::default()
            }],
            busy: 0,
        };
        let p = crate::proto::iperf3::TestParams {
            transport: Transport::Tcp,
            streams: 1,
            mode: crate::proto::iperf3::Mode::ClientSends,
            time_s: 1.0,
            omit_s: 0.0,
            len: 1000,
            bandwidth_bps: 0,
            counters_64bit: false,
            congestion: None,
            client_version: None,
        };
        let mut r = TestResult::new("t gen1", String::new(), params_of(&p));
        let e = server_view(&mut r, &[], &report, Some("mine"), "gen1", "srv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no record of gen1's test"), "{e}");
        let e = server_view(&mut r, &[], &report, None, "gen1", "srv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cookie"), "{e}");
        // Found: kept without its cookie.
        let e = server_view(&mut r, &[], &report, Some("other"), "gen1", "srv");
        assert!(e.is_ok());
        let kept = r.server_record.expect("kept");
        assert_eq!(kept.cookie, None);
    }
}

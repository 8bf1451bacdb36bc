//! `linerate tcp` and `linerate udp`: one test between two endpoints the user
//! names (this namespace or existing named namespaces), no lab built.

use crate::agent::Netns;
use crate::cli::{Common, Endpoints, TcpArgs, UdpArgs};
use crate::controller::Fleet;
use crate::engine::{check_destination, udp};
use crate::lab::Addressing;
use crate::proto::Direction;
use crate::run::Run;
use crate::runner::{Ends, TcpTest, UdpTest};
use anyhow::{bail, Result};
use std::net::IpAddr;
use std::time::Duration;

pub(crate) fn endpoint(spec: &str) -> Result<Netns> {
    if spec == "local" {
        return Ok(Netns::Current);
    }
    if let Some(name) = spec
        .strip_prefix("ns:")
        .or_else(|| spec.strip_prefix("netns:"))
    {
        crate::netops::check_ifname(name)
            .map_err(|_| anyhow::anyhow!("'{name}' is not a namespace name"))?;
        if !std::path::Path::new("/run/netns").join(name).exists() {
            bail!("network namespace '{name}' does not exist (see `ip netns list`); create it or name another");
        }
        return Ok(Netns::Named(name.into()));
    }
    bail!("'{spec}' is not an endpoint: use `local` or `ns:NAME` (ssh:// hosts come with multi-host plans)")
}

fn direction(e: &Endpoints) -> Direction {
    if e.bidir {
        Direction::Both
    } else if e.reverse {
        Direction::Reverse
    } else {
        Direction::Forward
    }
}

pub(crate) fn addressing(ip: Option<IpAddr>) -> Addressing {
    Addressing {
        v4: ip.filter(|a| a.is_ipv4()),
        v6: ip.filter(|a| a.is_ipv6()),
        ..Default::default()
    }
}

struct Setup {
    fleet: Fleet,
    gen: usize,
    sink: usize,
    run: Run,
}

fn setup(e: &Endpoints, common: &Common, kind: &str) -> Result<Setup> {
    check_destination(e.target, &common.allow_target).map_err(|m| anyhow::anyhow!(m))?;
    if let Some(c) = e.client_address {
        check_destination(c, &common.allow_target).map_err(|m| anyhow::anyhow!(m))?;
    }
    if !(0.1..=3600.0).contains(&e.duration) {
        bail!("--duration {} is outside 0.1..=3600 s", e.duration);
    }
    let (client, server) = (endpoint(&e.client)?, endpoint(&e.server)?);
    if (matches!(client, Netns::Named(_)) || matches!(server, Netns::Named(_)))
        && !crate::sys::is_root()
    {
        bail!("entering a named network namespace needs root; run as root");
    }
    let name = common.name.clone().unwrap_or_else(|| kind.to_string());
    let run = Run::start(common, &name, !e.no_results)?;
    let log = |role: &str| run.dir.as_ref().map(|d| d.agent_log(role));
    let mut fleet = Fleet::new();
    let gen = fleet.spawn_local("gen", &client, log("gen").as_deref())?;
    let sink = fleet.spawn_local("sink", &server, log("sink").as_deref())?;
    Ok(Setup {
        fleet,
        gen,
        sink,
        run,
    })
}

/// Two named endpoints as test ends: no DUT in between that linerate knows of.
fn pair_ends<'f>(fleet: &'f mut Fleet, gen: usize, sink: usize, e: &Endpoints) -> Ends<'f> {
    Ends::new(
        fleet,
        (gen, sink, None),
        (addressing(e.client_address), addressing(Some(e.target))),
        None,
    )
}

pub fn tcp(a: &TcpArgs) -> i32 {
    let mut s = match setup(&a.ends, &a.common, "tcp") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e:#}");
            return 2;
        }
    };
    let t = TcpTest {
        name: format!(
            "tcp {} stream{}",
            a.streams,
            if a.streams == 1 { "" } else { "s" }
        ),
        ipv6: a.ends.target.is_ipv6(),
        streams: a.streams.max(1),
        direction: direction(&a.ends),
        duration: Duration::from_secs_f64(a.ends.duration),
        cpus: a.common.cpus.clone().map(|c| c.0).unwrap_or_default(),
        congestion: a.cc.clone(),
        buffer_len: a.buffer,
        allow: a.common.allow_target.clone(),
    };
    let mut ends = pair_ends(&mut s.fleet, s.gen, s.sink, &a.ends);
    s.run.tcp(&mut ends, &t);
    s.fleet.shutdown();
    s.run.finish(None)
}

pub fn udp(a: &UdpArgs) -> i32 {
    let dir = direction(&a.ends);
    let pre = || -> Result<(Option<f64>, bool)> {
        let ipv6 = a.ends.target.is_ipv6();
        udp::check_frames(a.frame_size, ipv6).map_err(|m| anyhow::anyhow!(m))?;
        if dir != Direction::Forward && a.ends.client_address.is_none() {
            bail!("UDP traffic towards the client needs its address: add --client-address ADDR");
        }
        let rate = a
            .rate
            .as_deref()
            .map(|r| {
                crate::cli::parse_rate(r, udp::average_frame(a.frame_size), a.common.line_rate)
            })
            .transpose()
            .map_err(|m| anyhow::anyhow!(m))?;
        Ok((rate, ipv6))
    };
    let (rate, ipv6) = match pre() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e:#}");
            return 2;
        }
    };
    let mut s = match setup(&a.ends, &a.common, "udp") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e:#}");
            return 2;
        }
    };
    let frame_name = match a.frame_size {
        crate::proto::FrameSpec::Fixed(n) => format!("{n}B"),
        crate::proto::FrameSpec::Imix => "imix".into(),
    };
    let t = UdpTest {
        name: format!("udp {frame_name} {:?}", a.flow_mode).to_lowercase(),
        ipv6,
        frame: a.frame_size,
        flow_mode: a.flow_mode.into(),
        flows: a.flows.max(1),
        direction: dir,
        duration: Duration::from_secs_f64(a.ends.duration),
        rate_pps: rate,
        rate_profile: None,
        batch: a.batch.clamp(1, 1024),
        cpus: a.common.cpus.clone().map(|c| c.0).unwrap_or_default(),
        allow: a.common.allow_target.clone(),
    };
    let mut ends = pair_ends(&mut s.fleet, s.gen, s.sink, &a.ends);
    s.run.udp(&mut ends, &t);
    s.fleet.shutdown();
    s.run.finish(None)
}

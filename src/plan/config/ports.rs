//! A plan's port lab: which host with a port generates and which sinks,
//! and the tests between them through the external DUT.

use super::LoadError;
use crate::lab::ports::{PortFlags, PortsSpec};
use crate::orchestrate::config::{HostConfig, PlanTest, PortLabConfig};
use crate::plan::Plan;

/// Which host with a port generates and which sinks, from the tests that
/// use them: one of each, each on one side of the DUT.
fn port_sides(
    plan: &Plan,
    hosts: &[HostConfig],
    tests: &[PlanTest],
    with_port: &[usize],
) -> Result<(usize, usize), LoadError> {
    let at = |i: usize, msg: String| LoadError::Plan(plan.error_at(plan.hosts[i].span, msg));
    let sends = |i: usize| tests.iter().any(|t| t.from.contains(&i));
    let receives = |i: usize| tests.iter().any(|t| t.to == i);
    let mut gen = None;
    let mut sink = None;
    for &i in with_port {
        let name = &hosts[i].name;
        let slot = match (sends(i), receives(i)) {
            (true, false) => &mut gen,
            (false, true) => &mut sink,
            (true, true) => {
                return Err(at(
                    i,
                    format!("host {name} has a port and both sends and receives; a port is one side of the DUT"),
                ))
            }
            (false, false) => {
                return Err(at(i, format!("host {name} has a port but no test uses it")))
            }
        };
        if let Some(other) = slot.replace(i) {
            return Err(at(
                i,
                format!(
                    "hosts {} and {name} both bring a port to the same side of the DUT; \
                     one generator port and one sink port make the lab",
                    hosts[other].name
                ),
            ));
        }
    }
    let (Some(gen), Some(sink)) = (gen, sink) else {
        return Err(at(
            with_port[0],
            "a port lab needs a generator host with a port and a sink host with a port".into(),
        ));
    };
    Ok((gen, sink))
}

/// Hosts with a port make a lab around the external DUT: exactly one on the
/// generator side and one on the sink side, and tests between those two.
pub(super) fn port_lab(
    plan: &Plan,
    hosts: &[HostConfig],
    tests: &[PlanTest],
) -> Result<Option<PortLabConfig>, LoadError> {
    let with_port: Vec<usize> = (0..hosts.len())
        .filter(|&i| !hosts[i].ports.is_empty())
        .collect();
    if with_port.is_empty() {
        return Ok(None);
    }
    let (gen, sink) = port_sides(plan, hosts, tests, &with_port)?;
    let ports = PortsSpec::from_flags(&PortFlags {
        gen_port: Some(&hosts[gen].ports[0]),
        sink_port: Some(&hosts[sink].ports[0]),
        ..Default::default()
    })
    .map_err(|e| LoadError::Ports(e.into()))?
    .ok_or(LoadError::NoPorts)?;
    let (sink4, sink6) = ports.sink_addresses();
    for (t, pt) in tests.iter().zip(&plan.tests) {
        let touches = t.to == sink || t.from.contains(&gen);
        if !touches {
            continue;
        }
        if t.from != [gen] || t.to != sink {
            return Err(LoadError::Plan(plan.error_at(
                pt.span,
                format!(
                    "test {}: with ports, traffic goes from {} through the DUT to {}; \
                         name exactly those as from and to",
                    t.name, hosts[gen].name, hosts[sink].name
                ),
            )));
        }
        if t.target != std::net::IpAddr::V4(sink4) && t.target != std::net::IpAddr::V6(sink6) {
            return Err(LoadError::Plan(plan.error_at(
                pt.span,
                format!(
                    "test {}: the sink's port gets {sink4} and {sink6} (the lab's \
                         addressing); send there (target, or address on host {})",
                    t.name, hosts[sink].name
                ),
            )));
        }
    }
    Ok(Some(PortLabConfig {
        gen_host: gen,
        sink_host: sink,
        ports,
    }))
}

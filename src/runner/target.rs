//! Target sanity before any traffic: the address a test aims at must be
//! one the server endpoint holds, or reaches by a route of its own (a
//! server behind a DUT it routes through), or no frame would arrive and
//! the test would measure a wrong path.

use crate::model::error::{chain, Context};
use crate::model::stderr::errln;
use crate::netops::reach;
use crate::proto::{Request, Response};
use crate::runner::error::{fail, Result};
use crate::topology::Agents;
use std::net::IpAddr;
use std::time::Duration;

/// Asks the server's agent (`server`, named `server_name` as the user
/// wrote it) whether it holds `target` or routes to it other than by its
/// default route; if not, fails with the endpoint that holds it when one
/// of this host's namespaces (or this namespace) does.
pub fn check_target(
    fleet: &mut dyn Agents,
    server: usize,
    server_name: &str,
    target: IpAddr,
) -> Result<()> {
    let answer = fleet
        .call(
            server,
            &Request::CheckTarget { addr: target },
            Duration::from_secs(10),
        )
        .with_context(|| format!("asking the server endpoint {server_name} about {target}"))?;
    let (owned, routed) = match answer {
        Response::TargetCheck { owned, routed, .. } => (owned, routed),
        other => fail!("unexpected answer to a target check: {other:?}"),
    };
    if owned || routed {
        return Ok(());
    }
    fail!("{}", not_on_server(target, server_name, owner(target)))
}

/// The address the generator's agent (`gen`, named `gen_name` as the user
/// wrote it) sends from towards `target`, by its own route lookup: right
/// for `ns:` and `ssh://` endpoints, whose routes this host cannot see.
/// Replies (latency probes) and reverse traffic go back to it.
pub fn source_address(
    fleet: &mut dyn Agents,
    gen: usize,
    gen_name: &str,
    target: IpAddr,
) -> Result<IpAddr> {
    let answer = fleet
        .call(
            gen,
            &Request::SourceAddress { towards: target },
            Duration::from_secs(10),
        )
        .with_context(|| {
            format!("asking the client endpoint {gen_name} for its source address towards {target}")
        })?;
    match answer {
        Response::Source { source, .. } => Ok(source),
        other => fail!("unexpected answer to a source address question: {other:?}"),
    }
}

/// The client's address: the one given, else the one its agent learns.
/// A failure to learn is said and leaves `None`: only tests that send
/// towards the client need it, and they say so, naming --client-address.
pub fn client_address(
    fleet: &mut dyn Agents,
    gen: usize,
    gen_name: &str,
    given: Option<IpAddr>,
    target: IpAddr,
) -> Option<IpAddr> {
    if given.is_some() {
        return given;
    }
    match source_address(fleet, gen, gen_name, target) {
        Ok(a) => Some(a),
        Err(e) => {
            errln!(
                "warning: {}; a test that sends towards the client needs --client-address ADDR",
                chain(&e)
            );
            None
        }
    }
}

/// The endpoint on this host that holds `target`: this namespace
/// (`local`) or a named one (`ns:NAME`).
fn owner(target: IpAddr) -> Option<String> {
    if reach::owned(target) {
        return Some("local".into());
    }
    reach::namespace_holding(target).map(|ns| format!("ns:{ns}"))
}

fn not_on_server(target: IpAddr, server: &str, owner: Option<String>) -> String {
    let head = format!(
        "{target} is not an address of the server endpoint {server} (it holds no such \
         address and has no route to it but its default route), so no frame would reach \
         the receiver"
    );
    match owner {
        Some(o) if o != server => format!("{head}; did you mean --server {o}?"),
        _ => format!(
            "{head}; name the endpoint that holds it with --server (local, ns:NAME or \
             ssh://host), or add a route to it there"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_names_the_endpoint_that_holds_the_target() {
        let t: IpAddr = "198.18.0.2".parse().unwrap();
        let m = not_on_server(t, "local", Some("ns:b".into()));
        assert!(
            m.starts_with("198.18.0.2 is not an address of the server endpoint local"),
            "{m}"
        );
        assert!(m.ends_with("did you mean --server ns:b?"), "{m}");
        let m = not_on_server(t, "ns:x", None);
        assert!(
            m.contains("name the endpoint that holds it with --server"),
            "{m}"
        );
    }
}

//! VLAN sub-interfaces for socket engines: UDP sockets cannot write tags,
//! so an end that must send or receive tagged frames through the kernel
//! gets `IF.ID` (QinQ: `IF.OUTER` as 802.1ad and `IF.OUTER.INNER` on it)
//! for the test, with the interface's addresses, routes and permanent
//! neighbours moved there; [`SubIf`]'s drop moves them back and deletes
//! the sub-interfaces. The agent's exit paths call [`restore_all`] too, and
//! an agent holding one turns a signal or its controller's death into that
//! clean-up (as for physical ports).

use super::cmd::{check_ifname, run, run_output};
use super::error::{err, fail, Result};
use crate::model::error::{chain, Context, Step};
use crate::model::stderr::errln;
use crate::proto::Vlan;
use serde_json::Value;
use std::net::IpAddr;
use std::sync::Mutex;

/// What a sub-interface took from its parent, to give back.
#[derive(Debug, Clone)]
struct Moved {
    parent: String,
    /// Created, outermost first; deleting the first removes the others.
    devs: Vec<String>,
    addrs: Vec<(IpAddr, u8)>,
    /// `ip route` argument lists of routes through the parent (not the
    /// kernel's own connected ones, which come back with the addresses).
    routes: Vec<Vec<String>>,
    neighbours: Vec<(IpAddr, String)>,
}

static HELD: Mutex<Vec<Moved>> = Mutex::new(Vec::new());

/// A sub-interface held for a job; dropping it gives everything back.
#[derive(Debug)]
pub struct SubIf {
    pub dev: String,
    parent: String,
}

impl Drop for SubIf {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = held.iter().position(|m| m.parent == self.parent) {
            let m = held.remove(i);
            if let Err(e) = restore(&m) {
                errln!(
                    "agent: removing VLAN sub-interface {}: {}",
                    self.dev,
                    chain(&e)
                );
            }
        }
    }
}

/// Gives back every sub-interface's addresses and deletes it (agent exit).
pub fn restore_all() {
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    while let Some(m) = held.pop() {
        if let Err(e) = restore(&m) {
            errln!(
                "agent: removing VLAN sub-interface of {}: {}",
                m.parent,
                chain(&e)
            );
        }
    }
}

/// Names of the sub-interfaces of `parent` for `vlan`, outermost first,
/// each within the kernel's 15 characters.
pub fn names(parent: &str, vlan: Vlan) -> Result<Vec<String>> {
    let outer = format!("{parent}.{}", vlan.id);
    let mut v = vec![outer.clone()];
    if let Some(i) = vlan.inner {
        v.push(format!("{outer}.{i}"));
    }
    for n in &v {
        if n.len() > 15 {
            fail!(
                "the VLAN sub-interface for VLAN {vlan} on {parent} would be named {n}, {} \
                 characters, and the kernel allows 15 (IFNAMSIZ); rename {parent} to something \
                 shorter (ip link set dev {parent} name SHORT), or create the sub-interface \
                 yourself, put the address on it and leave --vlan out",
                n.len()
            );
        }
        check_ifname(n)?;
    }
    Ok(v)
}

/// The VLAN tags of `dev` and the devices below it, outermost first
/// (none: not a VLAN device).
fn tags_of(dev: &str) -> Result<Option<Vlan>> {
    let link = |d: &str| -> Result<Value> {
        let v: Value =
            serde_json::from_str(&run_output("ip", &["-d", "-j", "link", "show", "dev", d])?)
                .with_context(|| format!("reading `ip -d -j link show dev {d}`"))?;
        v.as_array()
            .and_then(|a| a.first())
            .cloned()
            .ok_or_else(|| err!("no interface {d}"))
    };
    let vlan_of = |l: &Value| -> Option<(u16, String)> {
        let i = &l["linkinfo"];
        (i["info_kind"].as_str()? == "vlan").then_some(())?;
        Some((
            u16::try_from(i["info_data"]["id"].as_u64()?).ok()?,
            l["link"].as_str()?.to_string(),
        ))
    };
    let Some((id, lower)) = vlan_of(&link(dev)?) else {
        return Ok(None);
    };
    Ok(Some(match vlan_of(&link(&lower)?) {
        Some((outer, _)) => Vlan {
            id: outer,
            inner: Some(id),
        },
        None => Vlan { id, inner: None },
    }))
}

/// Makes `dev` (the interface that holds this end's address or routes
/// towards its peer) send and receive with `vlan`'s tags: nothing when it
/// already is that VLAN's device, else a sub-interface held until the
/// returned value drops.
pub fn ensure(dev: &str, vlan: Vlan) -> Result<Option<SubIf>> {
    check_ifname(dev)?;
    // From here a signal or the controller's death must give the
    // addresses back, not kill the agent with them moved.
    super::port::watch_signals()?;
    match tags_of(dev)? {
        Some(t) if t == vlan => return Ok(None),
        Some(t) => fail!(
            "this end reaches its peer through {dev}, the device of VLAN {t}, and the test asks \
             for VLAN {vlan}; give --vlan {t}, or leave --vlan out and route through VLAN {vlan}'s \
             own device"
        ),
        None => {}
    }
    let devs = names(dev, vlan)?;
    let routes = routes_via(dev)?;
    if routes
        .iter()
        .any(|r| r.get(1).map(String::as_str) == Some("default"))
    {
        fail!(
            "{dev} carries this host's default route, and a socket engine with --vlan would move \
             {dev}'s addresses to a VLAN sub-interface for the test, cutting the host off; use a \
             frame-building engine (--tx-engine packet/xdp, --rx-engine xdp), which write the \
             tags without touching addresses, or put the address on a sub-interface yourself"
        );
    }
    let mut moved = Moved {
        parent: dev.to_string(),
        devs: Vec::new(),
        addrs: addresses(dev)?,
        routes,
        neighbours: neighbours(dev)?,
    };
    if moved.addrs.is_empty() {
        fail!("{dev} holds no address to move to a VLAN sub-interface for --vlan {vlan}");
    }
    let res = stack_and_move(&mut moved, &devs, vlan);
    let top = moved.devs.last().cloned().unwrap_or_default();
    HELD.lock().unwrap_or_else(|p| p.into_inner()).push(moved);
    let held = SubIf {
        dev: top,
        parent: dev.to_string(),
    };
    // On failure the drop gives back what was moved so far.
    res.map(|()| Some(held))
}

/// Stacks the sub-interfaces `devs` of `vlan` on `moved.parent` (recorded
/// in `moved` as each is made) and moves its addresses, routes and
/// neighbours onto the top one.
fn stack_and_move(moved: &mut Moved, devs: &[String], vlan: Vlan) -> Result<()> {
    let parent = moved.parent.clone();
    let dev = parent.as_str();
    let mut below = dev.to_string();
    for (i, name) in devs.iter().enumerate() {
        let proto = if i == 0 && vlan.inner.is_some() {
            "802.1ad"
        } else {
            "802.1Q"
        };
        let id = if i == 0 {
            vlan.id
        } else {
            vlan.inner.unwrap_or(vlan.id)
        };
        let id = id.to_string();
        run(
            "ip",
            &[
                "link", "add", "link", &below, "name", name, "type", "vlan", "protocol", proto,
                "id", &id,
            ],
            None,
        )
        .map_err(|e| {
            let text = chain(&e);
            if text.contains("Unknown device type") || text.contains("not supported") {
                err!(
                    "creating VLAN sub-interface {name}: this kernel has no 802.1Q VLAN \
                     support (CONFIG_VLAN_8021Q; try `modprobe 8021q`), so a socket engine \
                     cannot send or receive tagged frames here; use --tx-engine packet or \
                     xdp and --rx-engine xdp, which handle the tags themselves"
                )
            } else {
                Step::new(format!("creating VLAN sub-interface {name} on {below}"), e).into()
            }
        })?;
        moved.devs.push(name.clone());
        run("ip", &["link", "set", "dev", name, "up"], None)?;
        below = name.clone();
    }
    let top = &below;
    for (a, p) in &moved.addrs {
        let cidr = format!("{a}/{p}");
        run("ip", &["addr", "del", &cidr, "dev", dev], None)?;
        run("ip", &["addr", "add", &cidr, "dev", top, "nodad"], None)
            .with_context(|| format!("moving {cidr} from {dev} to {top}"))?;
    }
    readd(moved, top)
}

/// Routes and permanent neighbours of `m` on `dev`.
fn readd(m: &Moved, dev: &str) -> Result<()> {
    for r in &m.routes {
        let mut args: Vec<&str> = vec![r[0].as_str(), "route", "replace"];
        args.extend(r[1..].iter().map(String::as_str));
        args.extend(["dev", dev]);
        run("ip", &args, None)
            .with_context(|| format!("moving route {} to {dev}", r[1..].join(" ")))?;
    }
    for (a, mac) in &m.neighbours {
        let a = a.to_string();
        run(
            "ip",
            &[
                "neigh",
                "replace",
                &a,
                "lladdr",
                mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ],
            None,
        )?;
    }
    Ok(())
}

fn restore(m: &Moved) -> Result<()> {
    if let Some(first) = m.devs.first() {
        // Deleting the outer device removes the inner one, their
        // addresses and routes.
        run("ip", &["link", "del", "dev", first], None)?;
    }
    for (a, p) in &m.addrs {
        let cidr = format!("{a}/{p}");
        // Replace: an address never moved (a failed set-up) is still there.
        run(
            "ip",
            &["addr", "replace", &cidr, "dev", &m.parent, "nodad"],
            None,
        )?;
    }
    readd(m, &m.parent)
}

/// For a TCP job with `--vlan`: `dev` made `vlan`'s device (a
/// sub-interface held until the first value drops, as [`ensure`]), and the
/// name of the device the streams then use, for the results.
pub fn hold(dev: &str, vlan: Vlan) -> Result<(Option<SubIf>, String)> {
    let sub = ensure(dev, vlan).with_context(|| {
        format!(
            "putting this end of the TCP test on VLAN {vlan}: TCP runs on the kernel's sockets, \
             which send tagged segments only through a VLAN device; run it where the kernel has \
             802.1Q (e.g. in a guest linerate boots, `[hosts.NAME.vm]`), or leave vlan out"
        )
    })?;
    let name = sub
        .as_ref()
        .map_or_else(|| dev.to_string(), |s| s.dev.clone());
    Ok((sub, name))
}

/// The interface that holds `addr` here (a receiver's address).
pub fn holder(addr: IpAddr) -> Result<String> {
    json(&["-j", "addr", "show"])?
        .iter()
        .find(|l| {
            l["addr_info"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|a| a["local"].as_str().and_then(|s| s.parse::<IpAddr>().ok()) == Some(addr))
        })
        .and_then(|l| l["ifname"].as_str().map(str::to_string))
        .ok_or_else(|| err!("no interface here holds {addr}, the address the senders aim at"))
}

/// The interface the route towards `dst` leaves by (a sender's).
pub fn egress(dst: IpAddr) -> Result<String> {
    json(&["-j", "route", "get", &dst.to_string()])?
        .first()
        .and_then(|r| r["dev"].as_str().map(str::to_string))
        .ok_or_else(|| err!("no route towards {dst}"))
}

fn json(args: &[&str]) -> Result<Vec<Value>> {
    let out = run_output("ip", args)?;
    let v: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Array(Vec::new()));
    Ok(v.as_array().cloned().unwrap_or_default())
}

fn addresses(dev: &str) -> Result<Vec<(IpAddr, u8)>> {
    let mut out = Vec::new();
    for l in json(&["-j", "addr", "show", "dev", dev])? {
        for a in l["addr_info"].as_array().into_iter().flatten() {
            let (Some(ip), Some(p)) = (
                a["local"].as_str().and_then(|s| s.parse::<IpAddr>().ok()),
                a["prefixlen"].as_u64().and_then(|p| u8::try_from(p).ok()),
            ) else {
                continue;
            };
            // Link-local IPv6 addresses belong to the link; the kernel makes
            // the sub-interface its own.
            if a["scope"].as_str() == Some("global") {
                out.push((ip, p));
            }
        }
    }
    Ok(out)
}

/// Routes through `dev` the kernel did not make itself, as `ip` arguments:
/// family, then `DST [via GW] [src SRC] [metric N]`.
fn routes_via(dev: &str) -> Result<Vec<Vec<String>>> {
    let mut out = Vec::new();
    for fam in ["-4", "-6"] {
        for r in json(&[fam, "-j", "route", "show", "dev", dev])? {
            if r["protocol"].as_str() == Some("kernel") {
                continue;
            }
            let Some(dst) = r["dst"].as_str() else {
                continue;
            };
            let mut a = vec![fam.to_string(), dst.to_string()];
            for (k, key) in [("gateway", "via"), ("prefsrc", "src"), ("metric", "metric")] {
                match &r[k] {
                    Value::String(s) => a.extend([key.to_string(), s.clone()]),
                    Value::Number(n) => a.extend([key.to_string(), n.to_string()]),
                    _ => {}
                }
            }
            out.push(a);
        }
    }
    Ok(out)
}

fn neighbours(dev: &str) -> Result<Vec<(IpAddr, String)>> {
    let mut out = Vec::new();
    for n in json(&["-j", "neigh", "show", "dev", dev, "nud", "permanent"])? {
        if let (Some(a), Some(mac)) = (
            n["dst"].as_str().and_then(|s| s.parse::<IpAddr>().ok()),
            n["lladdr"].as_str(),
        ) {
            out.push((a, mac.to_string()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_ifnamsiz() {
        let v: Vlan = "100".parse().unwrap();
        assert_eq!(names("gen0", v).unwrap(), ["gen0.100"]);
        let q: Vlan = "100.4094".parse().unwrap();
        assert_eq!(names("eth1", q).unwrap(), ["eth1.100", "eth1.100.4094"]);
        let e = names("enp129s0f1", q).unwrap_err().to_string();
        assert!(
            e.contains("enp129s0f1.100.4094") && e.contains("IFNAMSIZ"),
            "{e}"
        );
        assert!(names("enp129s0f1np1", v).is_err());
    }
}

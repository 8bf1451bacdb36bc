//! Link state of the interfaces in this process's network namespace,
//! watched while jobs run: a link that goes down and up again between two
//! interval reports (a DUT port bounced, a cable pulled) must mark those
//! intervals, so their loss is read as the link's and not the device's.
//!
//! One thread per process polls `/sys/class/net/*/{operstate,carrier_changes}`
//! every [`POLL`] through a private sysfs mount of this namespace (the
//! process's own /sys may show another namespace). Each poll that finds an
//! interface down, or its carrier changed since the last poll, logs an
//! event with a sequence number; a job keeps the last sequence it reported
//! and asks for the interfaces seen down since ([`LinkWatch::down_since`]).
//! Only interfaces up when the watch began are watched: an interface that
//! was down all along is not news, and one deleted since is gone, not down.

use crate::model::stderr::errln;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How often the watcher reads link state: often enough that a link down
/// for a fraction of an interval is seen, and cheap (two small sysfs reads
/// per interface).
pub const POLL: Duration = Duration::from_millis(100);
/// Events kept: a job reports every second, so a minute of polls is plenty.
const KEEP: usize = 4096;

/// One interface's state as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    pub name: String,
    /// `operstate` is `up` or `unknown` (loopback-like devices say unknown
    /// while working).
    pub up: bool,
    pub carrier_changes: u64,
}

/// Reads every interface under `root` (a `/sys/class/net`).
pub fn read_states(root: &Path) -> Vec<LinkState> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<LinkState> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let path = e.path();
            let oper = std::fs::read_to_string(path.join("operstate")).ok()?;
            let changes = std::fs::read_to_string(path.join("carrier_changes"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            let oper = oper.trim();
            Some(LinkState {
                name,
                up: oper == "up" || oper == "unknown",
                carrier_changes: changes,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// What the watcher has seen: a log of (sequence, interface seen down).
#[derive(Debug, Default)]
pub struct Events {
    seq: u64,
    log: VecDeque<(u64, String)>,
    /// Interfaces up at the first poll, with their last carrier_changes.
    watched: HashMap<String, u64>,
    started: bool,
}

impl Events {
    /// Takes one poll's states; returns nothing, records what went down.
    pub fn poll(&mut self, states: &[LinkState]) {
        self.seq += 1;
        if !self.started {
            self.started = true;
            for s in states.iter().filter(|s| s.up && s.name != "lo") {
                self.watched.insert(s.name.clone(), s.carrier_changes);
            }
            return;
        }
        for s in states {
            let Some(last) = self.watched.get_mut(&s.name) else {
                continue;
            };
            if !s.up || s.carrier_changes != *last {
                self.log.push_back((self.seq, s.name.clone()));
                if self.log.len() > KEEP {
                    self.log.pop_front();
                }
            }
            *last = s.carrier_changes;
        }
    }

    /// The newest sequence number: a job's starting mark.
    pub fn mark(&self) -> u64 {
        self.seq
    }

    /// Interfaces seen down after `mark`, sorted, and the new mark.
    pub fn down_since(&self, mark: u64) -> (Vec<String>, u64) {
        let names: BTreeSet<&String> = self
            .log
            .iter()
            .filter(|(s, _)| *s > mark)
            .map(|(_, n)| n)
            .collect();
        (names.into_iter().cloned().collect(), self.seq)
    }
}

/// The process's one link watcher.
#[derive(Clone)]
pub struct LinkWatch {
    events: Arc<Mutex<Events>>,
}

impl LinkWatch {
    /// The watcher, started on first use; `None` where this namespace's
    /// sysfs cannot be mounted (no CAP_SYS_ADMIN): intervals are then not
    /// marked, and the first job's agent log says why.
    pub fn get() -> Option<LinkWatch> {
        static WATCH: OnceLock<Option<LinkWatch>> = OnceLock::new();
        WATCH.get_or_init(start).clone()
    }

    /// The current mark (see [`Events::mark`]).
    pub fn mark(&self) -> u64 {
        self.events.lock().map(|e| e.mark()).unwrap_or(0)
    }

    /// Interfaces seen down after `mark`; moves `mark` on.
    pub fn down_since(&self, mark: &mut u64) -> Vec<String> {
        let Ok(e) = self.events.lock() else {
            return Vec::new();
        };
        let (names, next) = e.down_since(*mark);
        *mark = next;
        names
    }
}

fn start() -> Option<LinkWatch> {
    let events = Arc::new(Mutex::new(Events::default()));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let ev = Arc::clone(&events);
    let spawned = std::thread::Builder::new()
        .name("lr-linkwatch".into())
        .spawn(move || {
            // EBUSY: this namespace's sysfs is already mounted on /sys here
            // (a process started by `ip netns exec`), which is what we want.
            // EPERM: not root, so still in the namespace its /sys shows
            // (entering another takes root): read that, quietly.
            match crate::sys::private_sysfs() {
                Err(e) if ![Some(libc::EBUSY), Some(libc::EPERM)].contains(&e.raw_os_error()) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
                _ => {}
            }
            let root = Path::new("/sys/class/net");
            if let Ok(mut g) = ev.lock() {
                g.poll(&read_states(root));
            }
            let _ = ready_tx.send(Ok(()));
            loop {
                std::thread::sleep(POLL);
                let states = read_states(root);
                let Ok(mut g) = ev.lock() else { return };
                g.poll(&states);
            }
        });
    if let Err(e) = spawned {
        errln!("agent: not watching link state (starting its thread: {e}); intervals are not marked when a link goes down");
        return None;
    }
    match ready_rx.recv() {
        Ok(Ok(())) => Some(LinkWatch { events }),
        Ok(Err(e)) => {
            errln!(
                "agent: not watching link state: mounting this namespace's sysfs failed ({e}; it \
                 needs CAP_SYS_ADMIN); intervals are not marked when a link goes down"
            );
            None
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(name: &str, up: bool, changes: u64) -> LinkState {
        LinkState {
            name: name.into(),
            up,
            carrier_changes: changes,
        }
    }

    #[test]
    fn a_link_down_then_up_marks_the_intervals_it_spans() {
        let mut e = Events::default();
        e.poll(&[st("lo", true, 0), st("eth0", true, 2), st("eth1", false, 0)]);
        let mut mark = e.mark();
        e.poll(&[st("lo", true, 0), st("eth0", true, 2), st("eth1", false, 0)]);
        let (down, m) = e.down_since(mark);
        assert!(down.is_empty(), "eth1 was down from the start: {down:?}");
        mark = m;
        // eth0 goes down (one poll sees it down), then comes back between
        // polls of the next interval (only its carrier count shows it).
        e.poll(&[st("eth0", false, 3)]);
        let (down, m) = e.down_since(mark);
        assert_eq!(down, vec!["eth0".to_string()]);
        mark = m;
        e.poll(&[st("eth0", true, 4)]);
        let (down, m) = e.down_since(mark);
        assert_eq!(down, vec!["eth0".to_string()]);
        mark = m;
        e.poll(&[st("eth0", true, 4)]);
        assert!(e.down_since(mark).0.is_empty());
        // An interface deleted since is gone, not down.
        e.poll(&[]);
        assert!(e.down_since(mark).0.is_empty());
    }

    #[test]
    fn states_from_a_fixture_tree() {
        let dir = std::env::temp_dir().join(format!("lr-links-{}", std::process::id()));
        for (n, oper, ch) in [
            ("veth0", "up", "3"),
            ("veth1", "down", "1"),
            ("lo", "unknown", "0"),
        ] {
            std::fs::create_dir_all(dir.join(n)).unwrap();
            std::fs::write(dir.join(n).join("operstate"), format!("{oper}\n")).unwrap();
            std::fs::write(dir.join(n).join("carrier_changes"), format!("{ch}\n")).unwrap();
        }
        let s = read_states(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            s,
            vec![
                st("lo", true, 0),
                st("veth0", true, 3),
                st("veth1", false, 1)
            ]
        );
    }
}

//! Turning what OpenSSH prints into a message that says what went wrong and
//! what to do. Pure functions over captured text, so they are tested on the
//! exact messages OpenSSH 9.2 prints.

use super::SshTarget;

/// What kind of failure ssh's stderr shows, most specific first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    HostKeyChanged,
    HostKeyUnknown,
    AuthRefused,
    Refused,
    TimedOut,
    NoRoute,
    NameUnresolved,
    ClosedEarly,
    Other,
}

/// Each pattern (matched case-insensitively) and what it means. The first
/// match in this order wins: a changed key also prints "verification failed".
const PATTERNS: &[(&str, Failure)] = &[
    (
        "remote host identification has changed",
        Failure::HostKeyChanged,
    ),
    (
        "has changed and you have requested strict",
        Failure::HostKeyChanged,
    ),
    ("host key is known for", Failure::HostKeyUnknown),
    ("host key verification failed", Failure::HostKeyUnknown),
    ("permission denied", Failure::AuthRefused),
    ("too many authentication failures", Failure::AuthRefused),
    ("connection refused", Failure::Refused),
    ("timed out", Failure::TimedOut),
    ("no route to host", Failure::NoRoute),
    ("network is unreachable", Failure::NoRoute),
    ("could not resolve hostname", Failure::NameUnresolved),
    ("name or service not known", Failure::NameUnresolved),
    ("connection closed by", Failure::ClosedEarly),
    ("connection reset by", Failure::ClosedEarly),
    ("kex_exchange_identification", Failure::ClosedEarly),
];

/// The failure ssh's stderr shows and the lines that show it.
pub fn failure_of(stderr: &str) -> (Failure, Vec<&str>) {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '@'))
        .collect();
    let lower: Vec<String> = lines.iter().map(|l| l.to_ascii_lowercase()).collect();
    let first = PATTERNS
        .iter()
        .find(|(pattern, _)| lower.iter().any(|l| l.contains(pattern)));
    if let Some(&(_, failure)) = first {
        // Quote every line that shows this failure; the changed-key banner
        // also names the offending known_hosts line and how to remove it.
        let quoted = lines
            .iter()
            .zip(&lower)
            .filter(|(line, low)| {
                PATTERNS
                    .iter()
                    .any(|(p, f)| *f == failure && low.contains(p))
                    || (failure == Failure::HostKeyChanged
                        && (line.starts_with("Offending") || line.starts_with("ssh-keygen -f")))
            })
            .map(|(line, _)| *line)
            .collect();
        return (failure, quoted);
    }
    let tail = lines.len().saturating_sub(3);
    (Failure::Other, lines[tail..].to_vec())
}

/// Turns ssh's stderr into one message naming the host, quoting ssh and
/// saying what to do. Never suggests turning host-key checking off.
pub fn classify(target: &SshTarget, stderr: &str) -> String {
    let (failure, quoted) = failure_of(stderr);
    let said = if quoted.is_empty() {
        "ssh printed nothing".to_string()
    } else {
        format!("ssh said: \"{}\"", quoted.join(" / "))
    };
    let host = &target.host;
    let user = target
        .user
        .as_deref()
        .unwrap_or("the user your ssh_config names");
    let (what, advice) = match failure {
        Failure::HostKeyChanged => (
            "the host key has changed since it was recorded in known_hosts".to_string(),
            format!(
                "this can be an attack, or the host was reinstalled; confirm the new key \
                 with whoever runs {host}, then remove the old entry (ssh-keygen -R {host}) \
                 and connect again"
            ),
        ),
        Failure::HostKeyUnknown => (
            "its host key is not known (not in known_hosts, and no @cert-authority line \
             vouches for it)"
                .to_string(),
            format!(
                "verify the key and add it to known_hosts (e.g. ssh-keyscan {host}, then \
                 compare the fingerprint out of band), trust the host CA with an \
                 @cert-authority line, or pass --ssh-accept-new to record a host seen for \
                 the first time"
            ),
        ),
        Failure::AuthRefused => (
            format!("the host refused every key and certificate offered for user {user}"),
            "check that your key is authorized there; if you log in with a certificate, \
             check that it is valid now and lists this user among its principals \
             (ssh-keygen -L -f CERT); BatchMode allows no password or passphrase \
             prompt, so the key must be unencrypted or held by ssh-agent"
                .to_string(),
        ),
        Failure::Refused => (
            "nothing accepts ssh connections there (connection refused)".to_string(),
            "check that sshd runs on the host and listens on this port \
             (ssh://host:PORT names another port)"
                .to_string(),
        ),
        Failure::TimedOut => (
            "the host did not answer in time".to_string(),
            "check that the host is up and the address is right, and that no firewall \
             drops ssh on the way"
                .to_string(),
        ),
        Failure::NoRoute => (
            "there is no route to the host".to_string(),
            "check the address, and this machine's routes and links towards it".to_string(),
        ),
        Failure::NameUnresolved => (
            "the host name does not resolve".to_string(),
            "check its spelling, DNS, or the Host entries of your ssh_config".to_string(),
        ),
        Failure::ClosedEarly => (
            "the host closed the connection before login".to_string(),
            "sshd there may be refusing this client (AllowUsers, MaxStartups, \
             tcp wrappers) or be overloaded; see its log"
                .to_string(),
        ),
        Failure::Other => (
            "ssh failed".to_string(),
            "run the same connection by hand with ssh -v to see why".to_string(),
        ),
    };
    format!("{target}: {what} ({said}); {advice}")
}

/// Times of a certificate in seconds since the epoch (UTC); `None` is open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    pub valid_after: Option<i64>,
    pub valid_before: Option<i64>,
    /// Empty when the certificate names none.
    pub principals: Vec<String>,
}

/// Reads `ssh-keygen -L -f CERT` output produced with TZ=UTC.
pub fn parse_cert_listing(listing: &str) -> Option<CertInfo> {
    let mut valid = None;
    let mut principals = Vec::new();
    let mut in_principals = false;
    for line in listing.lines() {
        let t = line.trim();
        if let Some(v) = t.strip_prefix("Valid:") {
            valid = Some(v.trim().to_string());
            in_principals = false;
        } else if let Some(p) = t.strip_prefix("Principals:") {
            in_principals = true;
            let p = p.trim();
            if !p.is_empty() && p != "(none)" {
                principals.push(p.to_string());
            }
        } else if t.ends_with(':') || t.contains(": ") {
            in_principals = false;
        } else if in_principals && !t.is_empty() && t != "(none)" {
            principals.push(t.to_string());
        }
    }
    let valid = valid?;
    let (after, before) = match valid.as_str() {
        "forever" => (None, None),
        v => {
            if let Some(rest) = v.strip_prefix("from ") {
                let (from, to) = rest.split_once(" to ")?;
                let to = if to == "forever" {
                    None
                } else {
                    Some(parse_utc(to)?)
                };
                (Some(parse_utc(from)?), to)
            } else if let Some(to) = v.strip_prefix("before ") {
                (None, Some(parse_utc(to)?))
            } else if let Some(from) = v.strip_prefix("after ") {
                (Some(parse_utc(from)?), None)
            } else {
                return None;
            }
        }
    };
    Some(CertInfo {
        valid_after: after,
        valid_before: before,
        principals,
    })
}

/// Why this certificate cannot log in as `user` at time `now`, if it cannot.
pub fn cert_problem(info: &CertInfo, now: i64, user: Option<&str>) -> Option<String> {
    if let Some(before) = info.valid_before {
        if now >= before {
            return Some(format!("expired at {}", format_utc(before)));
        }
    }
    if let Some(after) = info.valid_after {
        if now < after {
            return Some(format!("is not valid before {}", format_utc(after)));
        }
    }
    if let Some(user) = user {
        if !info.principals.is_empty() && !info.principals.iter().any(|p| p == user) {
            return Some(format!(
                "does not list user {user} among its principals ({})",
                info.principals.join(", ")
            ));
        }
    }
    None
}

/// "2020-01-02T00:00:00" (UTC) to seconds since the epoch.
fn parse_utc(s: &str) -> Option<i64> {
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':').map(|x| x.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    Some(days_from_civil(y, m, day) * 86_400 + hh * 3600 + mm * 60 + ss)
}

fn format_utc(t: i64) -> String {
    let (days, secs) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

// Howard Hinnant's civil calendar algorithms (public domain), proleptic
// Gregorian; enough to compare certificate times without a date crate.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> SshTarget {
        SshTarget::parse_url("ssh://root@198.19.200.1").unwrap()
    }

    // Messages below are what OpenSSH_9.2p1 Debian-2+deb12u10 printed at the
    // default LogLevel with BatchMode=yes.
    const DENIED: &str = "root@198.19.200.1: Permission denied (publickey).\r\n";
    const UNKNOWN: &str = "No ED25519 host key is known for 198.19.200.1 and you have \
        requested strict checking.\r\nHost key verification failed.\r\n";
    const CHANGED: &str = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n\
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n\
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n\
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\n\
Someone could be eavesdropping on you right now (man-in-the-middle attack)!\n\
It is also possible that a host key has just been changed.\n\
The fingerprint for the ED25519 key sent by the remote host is\n\
SHA256:CWnPlrR/IpRx1rbxWLWRksRqhB/Fh3T7Z78GqAVDun4.\n\
Please contact your system administrator.\n\
Add correct host key in /tmp/x/kh_changed to get rid of this message.\n\
Offending ED25519 key in /tmp/x/kh_changed:1\n\
  remove with:\n\
  ssh-keygen -f \"/tmp/x/kh_changed\" -R \"198.19.200.1\"\n\
Host key for 198.19.200.1 has changed and you have requested strict checking.\n\
Host key verification failed.\n";

    #[test]
    fn auth_refused_names_host_and_quotes_ssh() {
        let m = classify(&target(), DENIED);
        assert!(
            m.starts_with("ssh://root@198.19.200.1: the host refused"),
            "{m}"
        );
        assert!(m.contains("\"root@198.19.200.1: Permission denied (publickey).\""));
        assert!(m.contains("ssh-keygen -L -f CERT"), "{m}");
    }

    #[test]
    fn host_keys() {
        let m = classify(&target(), UNKNOWN);
        assert_eq!(failure_of(UNKNOWN).0, Failure::HostKeyUnknown);
        assert!(m.contains("No ED25519 host key is known"), "{m}");
        assert!(m.contains("--ssh-accept-new"), "{m}");
        let m = classify(&target(), CHANGED);
        assert_eq!(failure_of(CHANGED).0, Failure::HostKeyChanged);
        assert!(m.contains("ssh-keygen -R 198.19.200.1"), "{m}");
        assert!(
            m.contains("Offending ED25519 key in /tmp/x/kh_changed:1"),
            "{m}"
        );
        assert!(!m.to_lowercase().contains("stricthostkeychecking=no"));
    }

    #[test]
    fn network_failures() {
        for (stderr, want) in [
            (
                "ssh: connect to host 198.19.200.1 port 22: Connection refused",
                Failure::Refused,
            ),
            (
                "ssh: connect to host 198.19.200.1 port 22: Connection timed out",
                Failure::TimedOut,
            ),
            (
                "Connection timed out during banner exchange\nConnection to 198.18.99.1 port 22 timed out",
                Failure::TimedOut,
            ),
            (
                "ssh: connect to host 198.19.251.3 port 22: Network is unreachable",
                Failure::NoRoute,
            ),
            (
                "ssh: Could not resolve hostname nonexistent.invalid: Name or service not known",
                Failure::NameUnresolved,
            ),
            (
                "kex_exchange_identification: Connection closed by remote host",
                Failure::ClosedEarly,
            ),
            ("something new", Failure::Other),
        ] {
            assert_eq!(failure_of(stderr).0, want, "{stderr}");
            let m = classify(&target(), stderr);
            assert!(m.contains(stderr.lines().last().unwrap()), "{m}");
        }
        assert!(classify(&target(), "").contains("ssh printed nothing"));
    }

    const LISTING: &str = "user-cert.pub:
        Type: ssh-ed25519-cert-v01@openssh.com user certificate
        Public key: ED25519-CERT SHA256:FZKvV8yacBtEy6UqNvx7iSuUj+zDusHwwxeva/3vc5w
        Signing CA: ED25519 SHA256:70i03uA5tps6jKN8uyWn5xUiB6LPINs7M2tOT3kuFJw (using ssh-ed25519)
        Key ID: \"id\"
        Serial: 0
        Valid: from 2020-01-01T00:00:00 to 2020-01-02T00:00:00
        Principals: 
                root
                admin
        Critical Options: (none)
        Extensions: 
                permit-X11-forwarding
";

    #[test]
    fn certificate_listing() {
        let info = parse_cert_listing(LISTING).unwrap();
        assert_eq!(info.valid_after, Some(1_577_836_800));
        assert_eq!(info.valid_before, Some(1_577_923_200));
        assert_eq!(info.principals, ["root", "admin"]);
        let now = 1_800_000_000;
        assert_eq!(
            cert_problem(&info, now, Some("root")).unwrap(),
            "expired at 2020-01-02 00:00:00 UTC"
        );
        assert!(cert_problem(&info, 1_577_800_000, Some("root"))
            .unwrap()
            .starts_with("is not valid before 2020-01-01"));
        assert_eq!(cert_problem(&info, 1_577_900_000, Some("admin")), None);
        assert!(cert_problem(&info, 1_577_900_000, Some("bob"))
            .unwrap()
            .contains("principals (root, admin)"));
        let open = parse_cert_listing("Valid: forever\nPrincipals: (none)\n").unwrap();
        assert_eq!(cert_problem(&open, now, Some("x")), None);
        let after = parse_cert_listing("Valid: after 2020-01-01T00:00:00\n").unwrap();
        assert_eq!(after.valid_before, None);
        assert!(parse_cert_listing("Valid: from soon to later").is_none());
    }

    #[test]
    fn calendar_round_trips() {
        for t in [0, 951_782_400, 1_577_923_200, 4_102_444_800 + 12_345] {
            let s = format_utc(t);
            let iso = s.trim_end_matches(" UTC").replace(' ', "T");
            assert_eq!(parse_utc(&iso), Some(t), "{s}");
        }
    }
}

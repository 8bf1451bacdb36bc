//! Where a host is reached, `ssh://[user@]host[:port]` (or the plan
//! file's bare `[user@]host[:port]`), parsed strictly: nothing that ssh
//! could read as an option or a second destination gets through.

use std::fmt;

/// Why a host could not be read as an ssh target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("{0:?} is not an ssh URL: write ssh://[user@]host[:port], e.g. ssh://root@198.18.0.2")]
    NotUrl(String),
    #[error("{0:?} is not an ssh host: only ssh:// is supported; write [user@]host[:port]")]
    OtherScheme(String),
    #[error("{input:?} is not a valid ssh URL: {why}; write ssh://[user@]host[:port]")]
    BadUrl { input: String, why: Flaw },
    #[error("{input:?} is not a valid ssh host: {why}; write [user@]host[:port]")]
    BadHost { input: String, why: Flaw },
}

/// What is wrong inside `[user@]host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Flaw {
    #[error("it has a path; only [user@]host[:port] is allowed")]
    Path,
    #[error("the user before '@' is empty")]
    EmptyUser,
    #[error("user {0:?} has characters ssh cannot take")]
    User(String),
    #[error("an IPv6 address opened with '[' needs a closing ']'")]
    Bracket,
    #[error("{0:?} in brackets is not an IPv6 address")]
    NotIpv6(String),
    #[error("expected ':port' after ']'")]
    AfterBracket,
    #[error("an IPv6 address needs brackets: [2001:2::1]:22")]
    NeedsBrackets,
    #[error("the host is empty")]
    EmptyHost,
    #[error("host {0:?} is not a host name or address")]
    Host(String),
    #[error("port {0:?} is not a number from 1 to 65535")]
    Port(String),
}

/// Where a host is reached: `ssh://[user@]host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// `None` leaves the user to ssh_config (or the local user name).
    pub user: Option<String>,
    /// A name or an address; IPv6 without brackets.
    pub host: String,
    /// `None` leaves the port to ssh_config (or 22).
    pub port: Option<u16>,
}

impl SshTarget {
    /// Parses `ssh://[user@]host[:port]`, IPv6 hosts in brackets.
    pub fn parse_url(s: &str) -> Result<Self, TargetError> {
        let rest = s
            .strip_prefix("ssh://")
            .ok_or_else(|| TargetError::NotUrl(s.to_string()))?;
        Self::parse_authority(rest).map_err(|why| TargetError::BadUrl {
            input: s.to_string(),
            why,
        })
    }

    /// Parses the plan-file form `[user@]host[:port]`; the ssh:// form is
    /// accepted too.
    pub fn parse_bare(s: &str) -> Result<Self, TargetError> {
        if s.starts_with("ssh://") {
            return Self::parse_url(s);
        }
        if s.contains("://") {
            return Err(TargetError::OtherScheme(s.to_string()));
        }
        Self::parse_authority(s).map_err(|why| TargetError::BadHost {
            input: s.to_string(),
            why,
        })
    }

    fn parse_authority(s: &str) -> Result<Self, Flaw> {
        let s = s.strip_suffix('/').unwrap_or(s);
        if s.contains('/') {
            return Err(Flaw::Path);
        }
        let (user, hostport) = match s.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, s),
        };
        if let Some(u) = user {
            if u.is_empty() {
                return Err(Flaw::EmptyUser);
            }
            if u.starts_with('-')
                || u.chars()
                    .any(|c| c.is_whitespace() || c.is_control() || c == '@' || c == ':')
            {
                return Err(Flaw::User(u.to_string()));
            }
        }
        let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
            let (h, after) = inner.split_once(']').ok_or(Flaw::Bracket)?;
            if h.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(Flaw::NotIpv6(h.to_string()));
            }
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or(Flaw::AfterBracket)?),
            };
            (h, port)
        } else {
            match hostport.split_once(':') {
                Some((h, p)) if !p.contains(':') => (h, Some(p)),
                Some(_) => return Err(Flaw::NeedsBrackets),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err(Flaw::EmptyHost);
        }
        if host.starts_with('-')
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '%'))
        {
            return Err(Flaw::Host(host.to_string()));
        }
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(Flaw::Port(p.to_string())),
            },
        };
        Ok(SshTarget {
            user: user.map(str::to_string),
            host: host.to_string(),
            port,
        })
    }

    /// `-l user -p port host`, as ssh takes them.
    pub(super) fn destination_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        if let Some(u) = &self.user {
            a.extend(["-l".to_string(), u.clone()]);
        }
        if let Some(p) = self.port {
            a.extend(["-p".to_string(), p.to_string()]);
        }
        a.push(self.host.clone());
        a
    }
}

impl fmt::Display for SshTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ssh://")?;
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        let t = SshTarget::parse_url("ssh://root@198.18.0.2:2222").unwrap();
        assert_eq!(
            t,
            SshTarget {
                user: Some("root".into()),
                host: "198.18.0.2".into(),
                port: Some(2222)
            }
        );
        assert_eq!(t.to_string(), "ssh://root@198.18.0.2:2222");
        let t = SshTarget::parse_url("ssh://[2001:2::1]:22").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.user.is_none()),
            ("2001:2::1", Some(22), true)
        );
        assert_eq!(t.to_string(), "ssh://[2001:2::1]:22");
        let t = SshTarget::parse_bare("lab-b").unwrap();
        assert_eq!(t.to_string(), "ssh://lab-b");
        assert_eq!(
            SshTarget::parse_bare("ssh://u@h").unwrap().user.as_deref(),
            Some("u")
        );
        for bad in [
            "root@h",
            "ssh://",
            "ssh://h:0",
            "ssh://h:70000",
            "ssh://2001:2::1",
            "ssh://[nope]:22",
            "ssh://-oProxyCommand=x",
            "ssh://@h",
            "ssh://h/path",
            "ssh://h;rm",
        ] {
            let e = SshTarget::parse_url(bad).unwrap_err();
            assert!(
                e.to_string().contains("ssh://[user@]host[:port]"),
                "{bad}: {e}"
            );
        }
        assert!(SshTarget::parse_bare("http://h")
            .unwrap_err()
            .to_string()
            .contains("only ssh://"));
    }
}

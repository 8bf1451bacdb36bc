//! A network driver's own statistics (what `ethtool -S` prints), through
//! the SIOCETHTOOL ioctl: the count of the statistics set, their names and
//! their values. Drivers keep counts there that /proc/net/dev does not
//! have, such as virtio-net's frames its XDP transmit path refused.

use super::cvt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `ETHTOOL_GSSET_INFO`: the sizes of string sets.
const GSSET_INFO: u32 = 0x37;
/// `ETHTOOL_GSTRINGS`: the names of a string set.
const GSTRINGS: u32 = 0x1b;
/// `ETHTOOL_GSTATS`: the values of the statistics set.
const GSTATS: u32 = 0x1d;
/// `ETH_SS_STATS`: the string set of the driver's statistics.
const SS_STATS: u32 = 1;
/// `ETH_GSTRING_LEN`: each name's fixed width.
const NAME_LEN: usize = 32;
/// More statistics than any driver has; a larger count is refused rather
/// than allocated.
const MAX_STATS: usize = 1 << 16;

/// The driver statistics of interface `ifname` in this thread's network
/// namespace, as (name, value) in the driver's order. An interface whose
/// driver keeps none (loopback, many virtual ones) gives an empty list;
/// an interface that does not exist gives the ioctl's error (ENODEV).
pub fn ethtool_stats(ifname: &str) -> io::Result<Vec<(String, u64)>> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ || ifname.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname:?} is not an interface name"),
        ));
    }
    // SAFETY: socket() takes no pointers; a non-negative result is a new
    // descriptor that the OwnedFd below owns and closes.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by socket() and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // ethtool_sset_info: cmd, reserved, sset_mask, then one u32 per set.
    let mut info = [0u64; 3];
    info[0] = pair(GSSET_INFO, 0);
    info[1] = 1 << SS_STATS;
    ioctl(&sock, ifname, &mut info)?;
    let count = if info[1] & (1 << SS_STATS) == 0 {
        0
    } else {
        halves(info[2]).0 as usize
    };
    if count == 0 {
        return Ok(Vec::new());
    }
    if count > MAX_STATS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{ifname}: the driver claims {count} statistics"),
        ));
    }
    // ethtool_gstrings: cmd, string_set, len, then len names of 32 bytes.
    let mut names = vec![0u64; 2 + (count * NAME_LEN).div_ceil(8)];
    names[0] = pair(GSTRINGS, SS_STATS);
    names[1] = pair(count as u32, 0);
    ioctl(&sock, ifname, &mut names)?;
    let got = (halves(names[1]).0 as usize).min(count);
    let bytes: Vec<u8> = names[1..].iter().flat_map(|w| w.to_ne_bytes()).collect();
    // The names start after the 12-byte header (cmd, string_set, len).
    let text = &bytes[4..];
    // ethtool_stats: cmd, n_stats, then n_stats u64 values.
    let mut values = vec![0u64; 1 + count];
    values[0] = pair(GSTATS, count as u32);
    ioctl(&sock, ifname, &mut values)?;
    let n = (halves(values[0]).1 as usize).min(got);
    Ok((0..n)
        .map(|i| {
            let raw = &text[i * NAME_LEN..(i + 1) * NAME_LEN];
            let end = raw.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
            (
                String::from_utf8_lossy(&raw[..end]).into_owned(),
                values[1 + i],
            )
        })
        .collect())
}

/// Two u32 fields in one 8-byte word, in memory order.
fn pair(first: u32, second: u32) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&first.to_ne_bytes());
    b[4..].copy_from_slice(&second.to_ne_bytes());
    u64::from_ne_bytes(b)
}

/// The two u32 fields of an 8-byte word, in memory order.
fn halves(word: u64) -> (u32, u32) {
    let b = word.to_ne_bytes();
    (
        u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
        u32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
    )
}

/// SIOCETHTOOL on `ifname` with `buf` as the command's structure.
fn ioctl(sock: &OwnedFd, ifname: &str, buf: &mut [u64]) -> io::Result<()> {
    // SAFETY: ifreq is plain data; all zeros is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    req.ifr_ifru.ifru_data = buf.as_mut_ptr().cast();
    // SAFETY: `req` names the interface (NUL-terminated: the name is
    // shorter than IFNAMSIZ and the rest is zero) and points at `buf`,
    // which we own and which is as large as the command's header says:
    // the kernel writes at most the count given in it.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut req) })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_pair_in_memory_order() {
        let w = pair(7, 9);
        assert_eq!(halves(w), (7, 9));
        assert_eq!(&w.to_ne_bytes()[..4], &7u32.to_ne_bytes());
    }

    #[test]
    fn loopback_keeps_no_driver_statistics() {
        // Loopback has no ethtool statistics: an empty list, no error.
        match ethtool_stats("lo") {
            Ok(s) => assert!(s.is_empty(), "{s:?}"),
            // Some kernels answer EOPNOTSUPP for a driver without stats.
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP), "{e}"),
        }
    }

    #[test]
    fn virtio_net_interfaces_give_their_xdp_transmit_drops() {
        // Reads only: every virtio-net interface of this host (a VM's
        // NIC) names its per-queue XDP transmit drops.
        let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
            return;
        };
        for e in dir.flatten() {
            let driver = std::fs::read_link(e.path().join("device/driver")).unwrap_or_default();
            if !driver.ends_with("virtio_net") {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let stats = ethtool_stats(&name).unwrap();
            // 6.1 names it per queue; newer kernels add a total.
            assert!(
                stats
                    .iter()
                    .any(|(n, _)| n == "tx_queue_0_xdp_tx_drops" || n == "tx0_xdp_tx_drops"),
                "{name}: {stats:?}"
            );
        }
    }

    #[test]
    fn a_missing_interface_is_an_error_and_bad_names_are_refused() {
        assert!(ethtool_stats("lr-no-such-if0").is_err());
        assert!(ethtool_stats("").is_err());
        assert!(ethtool_stats("a-name-longer-than-ifnamsiz").is_err());
    }
}

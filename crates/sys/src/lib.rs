//! Every system call linerate makes that Rust's standard library does not
//! wrap: namespaces, thread pinning, epoll, batched UDP I/O, socket options,
//! TCP_INFO, perf counters, AF_XDP, kernel TLS, ICMP sockets and BPF_PROG_RUN.
//!
//! This is the only crate of linerate allowed `unsafe`; every other crate
//! says `#![forbid(unsafe_code)]`. Each function hands back `io::Result` so
//! callers add their own context; nothing here panics or logs. Every unsafe
//! block carries a `// SAFETY:` comment that argues why it is sound.

use std::io;

mod bpf;
mod epoll;
mod ethtool;
pub mod icmp;
mod mmsg;
mod perf;
mod process;
mod socket;
pub mod tls;
mod xsk;

pub use bpf::{
    ifindex, percpu_array_layout, percpu_array_read, possible_cpus, raise_memlock_limit,
    xdp_link_create, xdp_test_run, PerCpuLayout, XdpRun, XdpRunResult, BPF_F_TEST_XDP_LIVE_FRAMES,
    XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE,
};
pub use epoll::{
    raise_nofile_limit, send_nonblocking, unacked_bytes, unread_bytes, Epoll, Interest, Ready,
};
pub use ethtool::ethtool_stats;
pub use mmsg::{bind_packet, packet_socket, set_qdisc_bypass, Recvmmsg, Sendmmsg};
pub use perf::{perf_cycles_on_cpu, perf_read};
pub use process::{
    allowed_cpus, die_with_parent, enter_netns, enter_netns_file, euid, is_root, memfd_with,
    monotonic_ns, netns_on_exec, peak_rss_bytes, pin_pid, pin_thread, private_sysfs,
    process_cpu_seconds, realtime_ns, set_fifo, set_fifo_self, set_parent_death_signal,
    set_timer_slack_ns, sleep_until_monotonic_ns, terminal_columns, thread_cpu_seconds,
    try_lock_exclusive, unshare_netns,
};
pub use socket::{
    connect_marked, connect_nonblocking, connect_nonblocking_marked, fin_acked, get_buffer,
    get_tos, recv_discard, sendfile, set_buffer, set_congestion, set_cork, set_max_pacing_rate,
    set_notsent_lowat, set_rcvlowat, set_recv_tos, set_tos, set_transparent, tcp_info,
    udp_freebind, udp_reuseport, Cmsg, SockAddr, TcpInfo,
};
pub use xsk::Xsk;

/// Turns a libc return value into `io::Result`, reading `errno` on failure.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

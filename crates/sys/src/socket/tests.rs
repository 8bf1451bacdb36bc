//! Tests of the socket options and calls.

use super::*;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

#[test]
fn tcp_info_reads_the_kernels_layout() {
    // include/uapi/linux/tcp.h: tcpi_dsack_dups at byte 216, then
    // tcpi_reord_seen. libc's struct once ended at 104 bytes and code
    // that read past it by hand read nothing when libc grew.
    assert_eq!(std::mem::offset_of!(libc::tcp_info, tcpi_dsack_dups), 216);
    assert_eq!(std::mem::offset_of!(libc::tcp_info, tcpi_reord_seen), 220);
    assert!(filled(224, 220) && !filled(223, 220) && !filled(104, 216));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let t = tcp_info(c.as_raw_fd()).unwrap();
    assert!(t.snd_cwnd > 0 && t.rtt_us > 0, "{t:?}");
    assert_eq!((t.total_retrans, t.dsack_dups), (0, 0));
}

/// A socket marked with set_tos sends that TOS / traffic class, and a
/// receiver that asked for it reads it per datagram, over IPv4 and
/// IPv6 (loopback keeps the byte as sent).
#[test]
fn tos_is_set_sent_and_read_back_per_datagram() {
    for (addr, tos) in [("127.0.0.1:0", 0xb8u8), ("[::1]:0", 0x28)] {
        let rx = std::net::UdpSocket::bind(addr).unwrap();
        let Ok(tx) = std::net::UdpSocket::bind(addr) else {
            continue; // no IPv6 here
        };
        set_recv_tos(rx.as_raw_fd()).unwrap();
        assert_eq!(get_tos(tx.as_raw_fd()).unwrap(), 0);
        set_tos(tx.as_raw_fd(), tos).unwrap();
        assert_eq!(get_tos(tx.as_raw_fd()).unwrap(), tos, "{addr}");
        let to = rx.local_addr().unwrap();
        tx.send_to(b"one", to).unwrap();
        set_tos(tx.as_raw_fd(), 0).unwrap();
        tx.send_to(b"two", to).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut mm = crate::Recvmmsg::with_tos(4, 8);
        let mut got = Vec::new();
        while got.len() < 2 {
            let n = mm.recv(rx.as_raw_fd(), true).unwrap();
            got.extend((0..n).map(|i| (mm.datagram(i).0.to_vec(), mm.tos(i))));
        }
        assert_eq!(
            got,
            [(b"one".to_vec(), Some(tos)), (b"two".to_vec(), Some(0))],
            "{addr}"
        );
        // Without control buffers there is no TOS to read.
        let mut plain = crate::Recvmmsg::new(4, 8);
        tx.send_to(b"3", to).unwrap();
        assert_eq!(plain.recv(rx.as_raw_fd(), true).unwrap(), 1);
        assert_eq!(plain.tos(0), None);
    }
}

#[test]
fn a_marked_connection_and_its_accepted_end_carry_the_tos() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    set_tos(l.as_raw_fd(), 0x20).unwrap();
    let c = connect_marked(l.local_addr().unwrap(), 0xb8, Duration::from_secs(2)).unwrap();
    assert_eq!(get_tos(c.as_raw_fd()).unwrap(), 0xb8);
    let (a, _) = l.accept().unwrap();
    assert_eq!(
        get_tos(a.as_raw_fd()).unwrap(),
        0x20,
        "inherited from the listener"
    );
    // Nothing listens on port 1 of loopback: refused, not a hang.
    let e = connect_marked("127.0.0.1:1".parse().unwrap(), 0, Duration::from_secs(2));
    assert_eq!(e.unwrap_err().kind(), io::ErrorKind::ConnectionRefused);
}

#[test]
fn connect_nonblocking_completes_or_reports_refusal() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let c = connect_nonblocking(addr).unwrap();
    // Non-blocking: a read with nothing there would block, not wait.
    let mut buf = [0u8; 4];
    let until = Instant::now() + Duration::from_secs(5);
    while c.peer_addr().is_err() {
        assert!(Instant::now() < until, "connect never completed");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(c.take_error().unwrap().is_none());
    let e = (&c).read(&mut buf).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    let (mut s, _) = l.accept().unwrap();
    (&c).write_all(b"hi").unwrap();
    s.read_exact(&mut buf[..2]).unwrap();
    assert_eq!(&buf[..2], b"hi");
    // A port nobody listens on: refused, at once or when it completes.
    drop(l);
    drop(s);
    match connect_nonblocking(addr) {
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused),
        Ok(c) => {
            let until = Instant::now() + Duration::from_secs(5);
            loop {
                if let Some(e) = c.take_error().unwrap() {
                    assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
                    break;
                }
                assert!(c.peer_addr().is_err(), "connected to a closed port");
                assert!(Instant::now() < until, "no refusal reported");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

#[test]
fn cork_holds_a_partial_segment_until_it_is_taken_off() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut s, _) = l.accept().unwrap();
    set_cork(c.as_raw_fd(), true).unwrap();
    c.write_all(&[1; 100]).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = [0u8; 200];
    assert!(s.read(&mut buf).is_err(), "a corked partial segment left");
    set_cork(c.as_raw_fd(), false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(s.read(&mut buf).unwrap(), 100);
}

#[test]
fn fin_acked_only_after_shutdown_is_acknowledged() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut s, _) = l.accept().unwrap();
    c.write_all(&[7; 4096]).unwrap();
    assert!(!fin_acked(c.as_raw_fd()).unwrap(), "open connection");
    c.shutdown(Shutdown::Write).unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while !fin_acked(c.as_raw_fd()).unwrap() {
        assert!(Instant::now() < until, "FIN never acknowledged");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), 4096);
    // The receiving side, which has not shut down, is not done.
    assert!(!fin_acked(s.as_raw_fd()).unwrap());
}

//! The control connection: one state byte at a time, length-prefixed JSON,
//! every read bounded by a deadline so a silent peer ends the test with an
//! error instead of a hang.

use super::Iperf3Error;
use crate::proto::iperf3::{self as wire, State};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub struct Control {
    pub conn: TcpStream,
    /// Who is at the other end, for messages ("iperf3 server 1.2.3.4:5201").
    pub peer: String,
}

/// How long one poll of the control socket waits before the stop flag and
/// the deadline are looked at again.
const POLL: Duration = Duration::from_millis(100);

impl Control {
    pub fn new(conn: TcpStream, peer: String) -> io::Result<Control> {
        conn.set_nodelay(true)?;
        Ok(Control { conn, peer })
    }

    /// Reads exactly `buf.len()` bytes by `deadline`. `Ok(false)`: the peer
    /// closed before the first byte.
    fn read_by(
        &mut self,
        buf: &mut [u8],
        deadline: Instant,
        stop: Option<&AtomicBool>,
        what: &str,
    ) -> Result<bool, Iperf3Error> {
        let mut got = 0;
        while got < buf.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Iperf3Error::Lost {
                    message: format!("the {} sent no {what} in time", self.peer),
                    partial: None,
                });
            }
            if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                return Err(Iperf3Error::Io(format!("stopped while waiting for {what}")));
            }
            self.conn
                .set_read_timeout(Some(left.min(POLL)))
                .map_err(Iperf3Error::io("setting a control read timeout"))?;
            match self.conn.read(&mut buf[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => {
                    return Err(Iperf3Error::Protocol(format!(
                        "the {} closed the control connection in the middle of {what}",
                        self.peer
                    )))
                }
                Ok(n) => got += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    return Err(Iperf3Error::Io(format!(
                        "reading {what} from the {}: {e}",
                        self.peer
                    )))
                }
            }
        }
        Ok(true)
    }

    /// The next state byte; `None` when the peer closed the connection.
    pub fn read_state(
        &mut self,
        deadline: Instant,
        stop: Option<&AtomicBool>,
    ) -> Result<Option<State>, Iperf3Error> {
        let mut b = [0u8; 1];
        if !self.read_by(&mut b, deadline, stop, "state byte")? {
            return Ok(None);
        }
        State::from_byte(b[0]).map(Some).map_err(|e| {
            Iperf3Error::Protocol(format!(
                "the {} sent {e}: it does not speak iperf3 3.x",
                self.peer
            ))
        })
    }

    /// A 4-byte big-endian number (the i_errno after SERVER_ERROR).
    pub fn read_u32(&mut self, deadline: Instant) -> Result<Option<u32>, Iperf3Error> {
        let mut b = [0u8; 4];
        Ok(self
            .read_by(&mut b, deadline, None, "error number")?
            .then(|| u32::from_be_bytes(b)))
    }

    pub fn read_exact_by(
        &mut self,
        buf: &mut [u8],
        deadline: Instant,
        what: &str,
    ) -> Result<(), Iperf3Error> {
        if self.read_by(buf, deadline, None, what)? {
            Ok(())
        } else {
            Err(Iperf3Error::Protocol(format!(
                "the {} closed the control connection instead of sending {what}",
                self.peer
            )))
        }
    }

    /// A length-prefixed JSON message, its length checked before the read.
    pub fn read_json<T: for<'de> Deserialize<'de>>(
        &mut self,
        deadline: Instant,
        what: &str,
    ) -> Result<T, Iperf3Error> {
        let mut p = [0u8; 4];
        self.read_exact_by(&mut p, deadline, what)?;
        let peer = self.peer.clone();
        let bad = |e: wire::Iperf3Error| Iperf3Error::Protocol(format!("the {peer}'s {what}: {e}"));
        let len = wire::json_len(&p).map_err(bad)?;
        let mut body = vec![0u8; len];
        self.read_exact_by(&mut body, deadline, what)?;
        wire::decode_body(&body).map_err(bad)
    }

    pub fn write_state(&mut self, s: State) -> Result<(), Iperf3Error> {
        self.write_all(&[s.byte()], "a state byte")
    }

    pub fn write_json<T: Serialize>(&mut self, v: &T, what: &str) -> Result<(), Iperf3Error> {
        let msg =
            wire::encode_json(v).map_err(|e| Iperf3Error::Protocol(format!("{what}: {e}")))?;
        self.write_all(&msg, what)
    }

    pub fn write_all(&mut self, b: &[u8], what: &str) -> Result<(), Iperf3Error> {
        let _ = self.conn.set_write_timeout(Some(Duration::from_secs(10)));
        self.conn
            .write_all(b)
            .map_err(|e| Iperf3Error::Io(format!("sending {what} to the {}: {e}", self.peer)))
    }
}

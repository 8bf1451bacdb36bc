//! The frame codec of the control protocol: a 4-byte big-endian length,
//! then that many bytes of JSON, bounded by [`MAX_MESSAGE`].

use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// Hard bound of one frame's JSON body. Interval reports of 1000 flows fit
/// comfortably; anything larger is a bug or an attack.
pub const MAX_MESSAGE: usize = 1 << 20;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The length prefix announces more than [`MAX_MESSAGE`] bytes.
    #[error("control message of {0} bytes exceeds the {MAX_MESSAGE}-byte limit")]
    Oversize(usize),
    #[error("empty control message")]
    Empty,
    /// The stream ended inside a frame.
    #[error("control stream ended in the middle of a message")]
    Truncated,
    #[error("malformed control message: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("reading the control stream: {0}")]
    Io(#[from] io::Error),
}

/// Serialises one message into a frame.
pub fn encode<T: Serialize>(msg: &T) -> io::Result<Vec<u8>> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    if body.len() > MAX_MESSAGE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("control message of {} bytes exceeds the limit", body.len()),
        ));
    }
    let len = u32::try_from(body.len()).map_err(io::Error::other)?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> io::Result<()> {
    w.write_all(&encode(msg)?)?;
    w.flush()
}

/// Reads one frame's body. `Ok(None)` is a clean end of stream between frames.
pub fn read_frame(r: &mut impl Read) -> Result<Option<Vec<u8>>, DecodeError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(DecodeError::Truncated),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 {
        return Err(DecodeError::Empty);
    }
    if len > MAX_MESSAGE {
        return Err(DecodeError::Oversize(len));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => DecodeError::Truncated,
        _ => DecodeError::Io(e),
    })?;
    Ok(Some(body))
}

/// Reads and decodes one message.
pub fn read_message<T: for<'de> Deserialize<'de>>(
    r: &mut impl Read,
) -> Result<Option<T>, DecodeError> {
    match read_frame(r)? {
        None => Ok(None),
        Some(body) => Ok(Some(serde_json::from_slice(&body)?)),
    }
}

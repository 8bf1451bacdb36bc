//! HTTP/2 for the download client (`--http2`, RFC 9113), without I/O: the
//! frame format (`frame`), HPACK as a client needs it (`hpack`, over the
//! Huffman code in `huffman`), and one connection's protocol state
//! (`conn::Session`). The event loop (`client_loop`, `client_h2`) owns the
//! sockets and the clock; nothing here reads one or knows of the run.

pub mod conn;
pub mod frame;
pub mod hpack;
mod huffman;

//! The raw TCP limit of the software transport: an echo and a sink peer on loopback, a
//! thread per connection like the software NAA's workers.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::Error;

/// Mode byte of a raw connection: echo `size`-byte messages.
const MODE_ECHO: u8 = 1;
/// Mode byte of a raw connection: discard until EOF, then reply with the byte count.
const MODE_SINK: u8 = 2;
/// Message of the classic stream-bandwidth measurement: 1 MiB written again and again, so
/// that both ends work on memory that stays in the caches.
pub(crate) const STREAM_CHUNK: usize = 1 << 20;
/// Largest echo or stream message a peer accepts (the sweep's sizes end at 1 GiB).
const MAX_MESSAGE: u64 = 1 << 30;

/// A raw TCP peer on loopback.
pub(crate) struct RawPeer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RawPeer {
    /// Listens on a free loopback port.
    pub(crate) fn start() -> Result<Self, Error> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("raw-tcp-master".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let _ = std::thread::Builder::new()
                        .name("raw-tcp-peer".into())
                        .spawn(move || {
                            if let Err(e) = serve(stream) {
                                eprintln!("raw TCP peer: {e}");
                            }
                        });
                }
            })?;
        Ok(Self {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Opens a raw connection in `mode` for messages of `size` bytes.
    fn open(&self, mode: u8, size: u64) -> Result<TcpStream, Error> {
        open(self.addr, mode, size)
    }

    /// An echo connection for round trips of `size` bytes.
    pub(crate) fn echo(&self, size: u64) -> Result<Echo, Error> {
        Echo::connect(self.addr, size)
    }

    /// One-direction stream bandwidth (bytes/s): `message`-byte writes from one buffer for
    /// `secs`, which the peer reads into one buffer of the same size, until the peer has read
    /// everything. With `message` the size of an RPC's region, both ends touch as much memory
    /// as the RPC's do ([`STREAM_CHUNK`] keeps it in the caches).
    pub(crate) fn stream_bandwidth(&self, secs: f64, message: usize) -> Result<f64, Error> {
        let message = message.max(1);
        let mut s = self.open(MODE_SINK, u64::try_from(message)?)?;
        let chunk = vec![0x5au8; message];
        let t = Instant::now();
        let until = Duration::try_from_secs_f64(secs)?;
        let mut sent = 0u64;
        while t.elapsed() < until {
            s.write_all(&chunk)?;
            sent += chunk.len() as u64;
        }
        s.shutdown(Shutdown::Write)?;
        let mut total = [0u8; 8];
        s.read_exact(&mut total)?;
        let dt = t.elapsed().as_secs_f64();
        let total = u64::from_le_bytes(total);
        if total != sent {
            return Err(format!("raw stream: sent {sent} bytes, the peer read {total}").into());
        }
        Ok(total as f64 / dt)
    }
}

impl Drop for RawPeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An echo connection of a [`RawPeer`].
pub(crate) struct Echo {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// Opens a raw connection to the peer at `addr` in `mode` for messages of `size` bytes.
fn open(addr: SocketAddr, mode: u8, size: u64) -> Result<TcpStream, Error> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    let mut hello = [0u8; 9];
    hello[0] = mode;
    hello[1..].copy_from_slice(&size.to_le_bytes());
    s.write_all(&hello)?;
    Ok(s)
}

impl Echo {
    /// An echo connection to the peer at `addr` (of this or another process) for round trips
    /// of `size` bytes.
    pub(crate) fn connect(addr: SocketAddr, size: u64) -> Result<Self, Error> {
        if size > MAX_MESSAGE {
            return Err(format!("raw echo: {size} bytes is over the peer's limit").into());
        }
        Ok(Self {
            stream: open(addr, MODE_ECHO, size)?,
            buf: vec![0x33; usize::try_from(size)?],
        })
    }

    /// One round trip of the connection's size each way; seconds.
    pub(crate) fn round_trip(&mut self) -> Result<f64, Error> {
        let t = Instant::now();
        self.stream.write_all(&self.buf)?;
        self.stream.read_exact(&mut self.buf)?;
        Ok(t.elapsed().as_secs_f64())
    }
}

fn serve(mut s: TcpStream) -> Result<(), Error> {
    s.set_nodelay(true)?;
    let mut hello = [0u8; 9];
    s.read_exact(&mut hello)?;
    let mut size = [0u8; 8];
    size.copy_from_slice(&hello[1..]);
    let size = u64::from_le_bytes(size);
    match hello[0] {
        MODE_ECHO if size <= MAX_MESSAGE => {
            let mut buf = vec![0u8; usize::try_from(size)?];
            loop {
                match s.read_exact(&mut buf) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                    Err(e) => return Err(e.into()),
                }
                s.write_all(&buf)?;
            }
        }
        MODE_SINK if (1..=MAX_MESSAGE).contains(&size) => {
            // Reads fill the buffer from the start again and again, as messages would.
            let mut buf = vec![0u8; usize::try_from(size)?];
            let (mut total, mut at) = (0u64, 0usize);
            loop {
                match s.read(&mut buf[at..])? {
                    0 => break,
                    n => {
                        total += n as u64;
                        at = (at + n) % buf.len();
                    }
                }
            }
            Ok(s.write_all(&total.to_le_bytes())?)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of messages larger than the classic chunk, read into a buffer of their
    /// size: every byte sent is counted once by the peer (the function fails otherwise).
    #[test]
    fn sized_stream_counts_every_byte() {
        let peer = RawPeer::start().unwrap();
        for message in [STREAM_CHUNK, 3 * STREAM_CHUNK / 2 + 7] {
            let bw = peer.stream_bandwidth(0.05, message).unwrap();
            assert!(bw.is_finite() && bw > 0.0, "{message}: {bw}");
        }
    }

    /// A stream message above the peer's limit is refused: the peer closes without
    /// answering, and the measurement fails instead of allocating it.
    #[test]
    fn oversized_stream_is_refused() {
        let peer = RawPeer::start().unwrap();
        let mut s = peer.open(MODE_SINK, MAX_MESSAGE + 1).unwrap();
        let _ = s.write_all(&[0u8; 16]);
        let _ = s.shutdown(Shutdown::Write);
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        assert!(answer.is_empty(), "{answer:?}");
    }
}

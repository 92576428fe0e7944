//! Connection management: the client handshake ([`connect`]), [`SoftListener`] and
//! [`SoftIncoming`].
//!
//! Handshake: the client sends HELLO (magic + version); the server answers ACCEPT, or REJECT
//! with a reason, once the application decided. Nothing else may be sent before ACCEPT.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use super::config::SoftConfig;
use super::endpoint::SoftEndpoint;
use super::frame::{Frame, HDR_LEN};
use crate::transport::{Incoming, Listener, Result, TransportError};

/// Maps a handshake I/O error: timeouts become [`TransportError::TimedOut`], a closed
/// connection [`TransportError::NotConnected`].
fn handshake_error(call: &'static str, e: io::Error) -> TransportError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => TransportError::TimedOut,
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => TransportError::NotConnected,
        _ => TransportError::Io { call, source: e },
    }
}

/// Time left until `deadline`, or `TimedOut`.
fn remaining(deadline: Instant) -> Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(TransportError::TimedOut)
    } else {
        Ok(left)
    }
}

/// Reads exactly `buf.len()` bytes before `deadline`.
fn read_exact_until(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> Result<()> {
    let mut got = 0;
    while got < buf.len() {
        stream
            .set_read_timeout(Some(remaining(deadline)?))
            .map_err(|e| handshake_error("setsockopt(SO_RCVTIMEO)", e))?;
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Err(TransportError::NotConnected),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(handshake_error("recv", e)),
        }
    }
    Ok(())
}

/// The active side: TCP connect (from `local` if given), HELLO, then ACCEPT or REJECT.
pub(crate) fn connect(
    config: &SoftConfig,
    remote: SocketAddr,
    local: Option<SocketAddr>,
    deadline: Instant,
) -> Result<SoftEndpoint> {
    let deadline = deadline.min(Instant::now() + config.connect_timeout);
    let io = |call| move |source| TransportError::Io { call, source };
    let socket = Socket::new(
        Domain::for_address(remote),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(io("socket"))?;
    if let Some(local) = local {
        socket.bind(&local.into()).map_err(io("bind"))?;
    }
    socket
        .connect_timeout(&remote.into(), remaining(deadline)?)
        .map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => TransportError::TimedOut,
            _ => TransportError::Io {
                call: "connect",
                source: e,
            },
        })?;
    let mut stream: TcpStream = socket.into();
    stream
        .set_nodelay(true)
        .map_err(io("setsockopt(TCP_NODELAY)"))?;
    stream
        .set_write_timeout(Some(remaining(deadline)?))
        .map_err(io("setsockopt(SO_SNDTIMEO)"))?;
    stream
        .write_all(&Frame::Hello.encode())
        .map_err(|e| handshake_error("send", e))?;
    let mut hdr = [0u8; HDR_LEN];
    read_exact_until(&mut stream, &mut hdr, deadline)?;
    match Frame::decode(&hdr).map_err(TransportError::Protocol)? {
        Frame::Accept => {
            tracing::debug!(%remote, "soft transport: connected");
            let mut ep = SoftEndpoint::new(config.clone(), stream)?;
            ep.start()?;
            Ok(ep)
        }
        Frame::Reject { len } => {
            let mut reason = vec![0u8; len as usize];
            read_exact_until(&mut stream, &mut reason, deadline)?;
            let reason = String::from_utf8_lossy(&reason);
            Err(TransportError::Rejected(
                reason.trim_end_matches('\0').to_owned(),
            ))
        }
        _ => Err(TransportError::Protocol("unexpected handshake frame")),
    }
}

/// A connection whose HELLO is still arriving.
#[derive(Debug)]
struct Handshake {
    stream: TcpStream,
    hdr: [u8; HDR_LEN],
    got: usize,
    since: Instant,
}

/// What a handshake step found.
enum Step {
    Wait,
    Drop,
    Ready,
}

impl Handshake {
    /// Reads what has arrived of the HELLO (the socket is non-blocking).
    fn advance(&mut self) -> Step {
        loop {
            match (&self.stream).read(&mut self.hdr[self.got..]) {
                Ok(0) => return Step::Drop,
                Ok(n) => {
                    self.got += n;
                    if self.got == HDR_LEN {
                        return match Frame::decode(&self.hdr) {
                            Ok(Frame::Hello) => Step::Ready,
                            _ => Step::Drop,
                        };
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Wait,
                Err(_) => return Step::Drop,
            }
        }
    }
}

/// A listening software-transport endpoint.
#[derive(Debug)]
pub struct SoftListener {
    listener: TcpListener,
    config: SoftConfig,
    local: SocketAddr,
    pending: Vec<Handshake>,
}

impl SoftListener {
    /// Binds and listens on `addr`.
    pub(crate) fn bind(config: SoftConfig, addr: SocketAddr) -> Result<Self> {
        let io = |call| move |source| TransportError::Io { call, source };
        let listener = TcpListener::bind(addr).map_err(io("bind"))?;
        listener
            .set_nonblocking(true)
            .map_err(io("fcntl(O_NONBLOCK)"))?;
        let local = listener.local_addr().map_err(io("getsockname"))?;
        tracing::debug!(%local, "soft transport: listening");
        Ok(Self {
            listener,
            config,
            local,
            pending: Vec::new(),
        })
    }

    /// Accepts every queued TCP connection into the handshake list.
    fn accept_all(&mut self) -> Result<bool> {
        let mut any = false;
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    any = true;
                    if stream.set_nonblocking(true).is_ok() {
                        tracing::trace!(%peer, "soft transport: TCP connection");
                        self.pending.push(Handshake {
                            stream,
                            hdr: [0; HDR_LEN],
                            got: 0,
                            since: Instant::now(),
                        });
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                    ) => {}
                Err(source) => {
                    return Err(TransportError::Io {
                        call: "accept",
                        source,
                    });
                }
            }
        }
    }

    /// Advances the handshakes; returns a connection whose HELLO is complete.
    fn next_ready(&mut self) -> Option<TcpStream> {
        let mut i = 0;
        while i < self.pending.len() {
            match self.pending[i].advance() {
                Step::Ready => return Some(self.pending.swap_remove(i).stream),
                Step::Drop => {
                    self.pending.swap_remove(i);
                }
                Step::Wait if self.pending[i].since.elapsed() > self.config.connect_timeout => {
                    self.pending.swap_remove(i);
                }
                Step::Wait => i += 1,
            }
        }
        None
    }
}

impl Listener for SoftListener {
    type Incoming = SoftIncoming;

    fn next_request(&mut self, deadline: Instant) -> Result<Option<SoftIncoming>> {
        let mut idle = Duration::from_micros(20);
        loop {
            let accepted = self.accept_all()?;
            while let Some(stream) = self.next_ready() {
                if stream.set_nonblocking(false).is_err() {
                    continue;
                }
                match SoftEndpoint::new(self.config.clone(), stream) {
                    Ok(endpoint) => return Ok(Some(SoftIncoming { endpoint })),
                    Err(e) => tracing::debug!(error = %e, "soft transport: request dropped"),
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            if accepted {
                idle = Duration::from_micros(20);
            }
            std::thread::sleep(idle.min(left));
            idle = (idle * 2).min(Duration::from_millis(2));
        }
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

/// A connection request not accepted yet (see [`Incoming`]). Dropping it rejects it.
#[derive(Debug)]
pub struct SoftIncoming {
    endpoint: SoftEndpoint,
}

impl Incoming for SoftIncoming {
    type Endpoint = SoftEndpoint;

    fn endpoint(&mut self) -> &mut SoftEndpoint {
        &mut self.endpoint
    }

    fn accept(mut self) -> Result<SoftEndpoint> {
        self.endpoint.send_accept()?;
        self.endpoint.start()?;
        Ok(self.endpoint)
    }

    fn reject(self, reason: &str) {
        self.endpoint.reject(reason);
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        crate::transport::Endpoint::peer_addr(&self.endpoint)
    }
}

//! Connection management: the client handshake ([`connect`]), [`SoftListener`] and
//! [`SoftIncoming`].
//!
//! Handshake: the client sends HELLO (magic + version); the server answers ACCEPT, or REJECT
//! with a reason, once the application decided. Nothing else may be sent before ACCEPT.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use socket2::{Domain, Protocol, Socket, Type};

use super::config::SoftConfig;
use super::endpoint::SoftEndpoint;
use super::frame::{Frame, HDR_LEN};
use crate::throttle::LogThrottle;
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
    // An NAA that closes the connection instead of answering HELLO refused it without a
    // reason (an older NAA rejecting, or a proxy in between): say so, and name the NAA.
    let closed = |e| match e {
        TransportError::NotConnected => TransportError::Rejected(format!(
            "the NAA at {remote} closed the connection before accepting it (no reason given)"
        )),
        e => e,
    };
    stream
        .write_all(&Frame::Hello.encode())
        .map_err(|e| closed(handshake_error("send", e)))?;
    let mut hdr = [0u8; HDR_LEN];
    read_exact_until(&mut stream, &mut hdr, deadline).map_err(closed)?;
    match Frame::decode(&hdr).map_err(TransportError::Protocol)? {
        Frame::Accept => {
            tracing::debug!(%remote, "soft transport: connected");
            let mut ep = SoftEndpoint::new(config.clone(), stream)?;
            ep.start()?;
            Ok(ep)
        }
        Frame::Reject { len } => {
            let mut reason = vec![0u8; len as usize];
            read_exact_until(&mut stream, &mut reason, deadline).map_err(closed)?;
            let reason = String::from_utf8_lossy(&reason);
            Err(TransportError::Rejected(
                reason.trim_end_matches('\0').to_owned(),
            ))
        }
        _ => Err(TransportError::Protocol("unexpected handshake frame")),
    }
}

/// Asks the NAA at `remote` what it serves (a catalog request instead of HELLO): its answer,
/// or `None` when the NAA does not answer such requests (it closes the connection: an NAA
/// of an older version, or one that is not a naaice-rs software NAA).
pub fn catalog(remote: SocketAddr, deadline: Instant) -> Result<Option<String>> {
    let io = |call| move |source| TransportError::Io { call, source };
    let mut stream =
        TcpStream::connect_timeout(&remote, remaining(deadline)?).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => TransportError::TimedOut,
            _ => TransportError::Io {
                call: "connect",
                source: e,
            },
        })?;
    stream
        .set_write_timeout(Some(remaining(deadline)?))
        .map_err(io("setsockopt(SO_SNDTIMEO)"))?;
    stream
        .write_all(&Frame::CatalogRequest.encode())
        .map_err(|e| handshake_error("send", e))?;
    let mut hdr = [0u8; HDR_LEN];
    match read_exact_until(&mut stream, &mut hdr, deadline) {
        Ok(()) => {}
        Err(TransportError::NotConnected) => return Ok(None),
        Err(e) => return Err(e),
    }
    let (len, rejected) = match Frame::decode(&hdr).map_err(TransportError::Protocol)? {
        Frame::Catalog { len } => (len, false),
        Frame::Reject { len } => (len, true),
        _ => {
            return Err(TransportError::Protocol(
                "unexpected answer to a catalog request",
            ));
        }
    };
    let mut text = vec![0u8; len as usize];
    read_exact_until(&mut stream, &mut text, deadline)?;
    let text = String::from_utf8_lossy(&text).into_owned();
    if rejected {
        return Err(TransportError::Rejected(text));
    }
    Ok(Some(text))
}

/// Most TCP connections whose HELLO is still awaited. A connection beyond it pushes out the
/// oldest one: a peer that opens connections and stays silent cannot grow the list (or hold
/// descriptors) without bound, and a new client always gets in.
pub const MAX_PENDING_HANDSHAKES: usize = 256;

/// When `accept` runs out of descriptors or memory, handshakes waiting longer than this for
/// their HELLO are dropped to free their descriptors (a client sends HELLO right after its
/// TCP handshake, so such a connection is stalled, not slow).
pub const STALLED_HANDSHAKE: Duration = Duration::from_millis(500);

/// First and longest pause of `accept` after it ran out of resources (doubling in between);
/// the pending handshakes are still read and expired meanwhile.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(5), Duration::from_millis(200));

/// At most one log line per this interval about failing `accept` calls.
const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(5);

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
    /// A catalog request instead of HELLO.
    Catalog,
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
                            Ok(Frame::CatalogRequest) => Step::Catalog,
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

/// What an `accept` error means for the listener.
enum AcceptError {
    /// The connection went away before it was accepted, or a signal: try again at once.
    Retry,
    /// Out of descriptors, memory or buffers (EMFILE, ENFILE, ENOBUFS, ENOMEM) or another
    /// passing condition: free stalled handshakes, pause accepting, keep serving.
    Exhausted,
    /// The listening socket itself is unusable.
    Fatal,
}

fn classify(e: &io::Error) -> AcceptError {
    match e.kind() {
        io::ErrorKind::Interrupted
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::ConnectionReset => AcceptError::Retry,
        _ => match e.raw_os_error() {
            Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EOPNOTSUPP | libc::EFAULT) => {
                AcceptError::Fatal
            }
            _ => AcceptError::Exhausted,
        },
    }
}

/// A listening software-transport endpoint.
///
/// Connections are accepted into a list of handshakes whose HELLO is awaited (bounded by
/// [`MAX_PENDING_HANDSHAKES`]; a handshake is dropped after the `connect_timeout` of its
/// [`SoftConfig`]). When `accept` fails for lack of descriptors or memory, the listener drops
/// handshakes older than [`STALLED_HANDSHAKE`], pauses accepting for a few milliseconds
/// (doubling up to 200 ms while it keeps failing), and goes on reading and expiring the
/// pending handshakes, so it recovers as soon as descriptors are free again. Such failures
/// are logged at most once every 5 s, with their count.
#[derive(Debug)]
pub struct SoftListener {
    listener: TcpListener,
    /// Boxed: the listener sits in `AnyListener` beside much smaller variants.
    config: Box<SoftConfig>,
    local: SocketAddr,
    /// Oldest first.
    pending: Vec<Handshake>,
    /// `accept` is not called before this instant (after it ran out of resources).
    paused_until: Option<Instant>,
    backoff: Duration,
    accept_errors: LogThrottle,
    /// Times [`SoftListener::next_request`] went to sleep (for tests).
    sleeps: u64,
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
            config: Box::new(config),
            local,
            pending: Vec::new(),
            paused_until: None,
            backoff: ACCEPT_BACKOFF.0,
            accept_errors: LogThrottle::new(ACCEPT_LOG_INTERVAL),
            sleeps: 0,
        })
    }

    /// Handshakes in progress (connections whose HELLO is awaited).
    pub fn pending_handshakes(&self) -> usize {
        self.pending.len()
    }

    /// Accepts every queued TCP connection into the handshake list. Only an unusable
    /// listening socket is an error; running out of resources pauses accepting.
    fn accept_all(&mut self) -> Result<bool> {
        let mut any = false;
        let now = Instant::now();
        if self.paused_until.is_some_and(|t| now < t) {
            return Ok(false);
        }
        self.paused_until = None;
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    any = true;
                    self.backoff = ACCEPT_BACKOFF.0;
                    if stream.set_nonblocking(true).is_ok() {
                        tracing::trace!(%peer, "soft transport: TCP connection");
                        if self.pending.len() >= MAX_PENDING_HANDSHAKES {
                            self.pending.remove(0);
                        }
                        self.pending.push(Handshake {
                            stream,
                            hdr: [0; HDR_LEN],
                            got: 0,
                            since: Instant::now(),
                        });
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                Err(e) => match classify(&e) {
                    AcceptError::Retry => {}
                    AcceptError::Fatal => {
                        return Err(TransportError::Io {
                            call: "accept",
                            source: e,
                        });
                    }
                    AcceptError::Exhausted => {
                        self.exhausted(now, &e);
                        return Ok(any);
                    }
                },
            }
        }
    }

    /// Logs how many accept failures the last line's window hid, once that window ended.
    fn summarize(&mut self, now: Instant) {
        if let Some(count) = self.accept_errors.expired(now) {
            log_hidden_failures(count);
        }
    }

    /// `accept` ran out of resources: drops stalled handshakes, pauses accepting.
    fn exhausted(&mut self, now: Instant, e: &io::Error) {
        let before = self.pending.len();
        self.pending
            .retain(|h| now.saturating_duration_since(h.since) < STALLED_HANDSHAKE);
        let dropped = before - self.pending.len();
        self.paused_until = Some(now + self.backoff);
        self.backoff = (self.backoff * 2).min(ACCEPT_BACKOFF.1);
        if let Some(count) = self.accept_errors.hit(now) {
            tracing::warn!(
                error = %e,
                count,
                pending = self.pending.len(),
                dropped_stalled = dropped,
                "soft transport: accept failed (count = failures since the last such line); \
                 backing off"
            );
        }
    }

    /// Sleeps until a connection or bytes of a HELLO arrive, a handshake times out, accepting
    /// resumes after a pause, or `deadline`: an idle listener does not wake up, and a new
    /// connection is taken at once.
    fn sleep(&mut self, now: Instant, deadline: Instant) {
        // A handshake is dropped once it is older than the timeout: wake just after that.
        let expiry = self.config.connect_timeout + Duration::from_millis(1);
        let paused = self.paused_until.filter(|t| now < *t);
        let until = self
            .pending
            .iter()
            .map(|h| h.since + expiry)
            .chain(paused)
            .fold(deadline, Instant::min);
        let mut fds = Vec::with_capacity(self.pending.len() + 1);
        if paused.is_none() {
            fds.push(PollFd::new(&self.listener, PollFlags::IN));
        }
        fds.extend(
            self.pending
                .iter()
                .map(|h| PollFd::new(&h.stream, PollFlags::IN)),
        );
        // (A wait beyond `Timespec`'s range is no different from an endless one.)
        let timeout = Timespec::try_from(until.saturating_duration_since(now)).ok();
        self.sleeps += 1;
        // An error (EINTR) only means: look again.
        let _ = rustix::event::poll(&mut fds, timeout.as_ref());
    }

    /// Advances the handshakes; returns a connection whose HELLO (or catalog request: true)
    /// is complete. Drops connections that closed, sent something else or exceeded the
    /// handshake timeout.
    fn next_ready(&mut self) -> Option<(TcpStream, bool)> {
        let mut i = 0;
        while i < self.pending.len() {
            match self.pending[i].advance() {
                Step::Ready => return Some((self.pending.remove(i).stream, false)),
                Step::Catalog => return Some((self.pending.remove(i).stream, true)),
                Step::Drop => {
                    self.pending.remove(i);
                }
                Step::Wait if self.pending[i].since.elapsed() > self.config.connect_timeout => {
                    self.pending.remove(i);
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
        loop {
            self.accept_all()?;
            while let Some((stream, catalog)) = self.next_ready() {
                if stream.set_nonblocking(false).is_err() {
                    continue;
                }
                match SoftEndpoint::new((*self.config).clone(), stream) {
                    Ok(endpoint) => return Ok(Some(SoftIncoming { endpoint, catalog })),
                    Err(e) => tracing::debug!(error = %e, "soft transport: request dropped"),
                }
            }
            let now = Instant::now();
            self.summarize(now);
            if now >= deadline {
                return Ok(None);
            }
            self.sleep(now, deadline);
        }
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

/// The summary line of accept failures a throttled line's window hid.
fn log_hidden_failures(count: u64) {
    tracing::warn!(
        count,
        "soft transport: accept failed (summary: count = failures not logged yet)"
    );
}

impl Drop for SoftListener {
    fn drop(&mut self) {
        if let Some(count) = self.accept_errors.flush() {
            log_hidden_failures(count);
        }
    }
}

/// A connection request not accepted yet (see [`Incoming`]). Dropping it rejects it.
#[derive(Debug)]
pub struct SoftIncoming {
    endpoint: SoftEndpoint,
    /// A catalog request, not a connection request.
    catalog: bool,
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

    fn wants_catalog(&self) -> bool {
        self.catalog
    }

    fn answer_catalog(self, text: &str) {
        self.endpoint.send_catalog(text);
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        crate::transport::Endpoint::peer_addr(&self.endpoint)
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpStream;

    use super::*;

    fn listener(config: SoftConfig) -> SoftListener {
        SoftListener::bind(config, "127.0.0.1:0".parse().unwrap()).unwrap()
    }

    /// An idle listener sleeps through its wait in one go (it used to wake up every 2 ms).
    /// A fake NAA on loopback that reads HELLO, then does `then` with the stream.
    fn fake_naa(then: fn(TcpStream)) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut hello = [0u8; HDR_LEN];
            s.read_exact(&mut hello).unwrap();
            then(s);
        });
        addr
    }

    fn connect_to(addr: SocketAddr) -> TransportError {
        let deadline = Instant::now() + Duration::from_secs(10);
        connect(&SoftConfig::default(), addr, None, deadline).unwrap_err()
    }

    #[test]
    fn a_close_in_the_handshake_is_a_rejection_naming_the_naa() {
        let addr = fake_naa(drop);
        let e = connect_to(addr).to_string();
        assert_eq!(
            e,
            format!(
                "connection rejected by the peer: the NAA at {addr} closed the connection \
                 before accepting it (no reason given)"
            )
        );
    }

    #[test]
    fn an_idle_listener_sleeps_until_its_deadline() {
        let mut l = listener(SoftConfig::default());
        let start = Instant::now();
        let deadline = start + Duration::from_millis(300);
        assert!(l.next_request(deadline).unwrap().is_none());
        assert!(Instant::now() >= deadline);
        assert!(l.sleeps <= 3, "{} sleeps", l.sleeps);
    }

    /// A client that connects while the listener sleeps wakes it: its request is returned
    /// (and accepted), without the listener waking up on its own meanwhile.
    #[test]
    fn a_connection_wakes_the_listener() {
        let mut l = listener(SoftConfig::default());
        let addr = l.local_addr();
        let client = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            connect(
                &SoftConfig::default(),
                addr,
                None,
                Instant::now() + Duration::from_secs(10),
            )
        });
        let incoming = l
            .next_request(Instant::now() + Duration::from_secs(10))
            .unwrap()
            .expect("a request");
        let _server = incoming.accept().unwrap();
        let _client = client.join().unwrap().unwrap();
        // Woken by the connection, then by its HELLO (if it came separately).
        assert!(l.sleeps <= 4, "{} sleeps", l.sleeps);
    }

    /// A connection that never sends its HELLO is dropped at the handshake timeout: the
    /// listener wakes up for that, not before.
    #[test]
    fn a_silent_connection_is_dropped_at_its_timeout() {
        let config = SoftConfig {
            connect_timeout: Duration::from_millis(100),
            ..SoftConfig::default()
        };
        let mut l = listener(config);
        let _silent = TcpStream::connect(l.local_addr()).unwrap();
        let deadline = Instant::now() + Duration::from_millis(400);
        assert!(l.next_request(deadline).unwrap().is_none());
        assert_eq!(l.pending_handshakes(), 0);
        assert!(l.sleeps <= 4, "{} sleeps", l.sleeps);
    }
}

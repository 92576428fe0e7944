//! The connection's TCP socket and the NIC thread's wake-up bell (an eventfd it polls beside
//! the socket). Every transfer is non-blocking (`MSG_DONTWAIT` per call; a `splice` sets the
//! socket non-blocking for its call, see [`Socket::nonblocking`]); threads block in
//! [`Socket::wait`], and an application thread that sleeps for a header in
//! [`Socket::recv_wait`] (one blocking receive instead of a poll and a receive).

use std::io::{self, IoSlice, IoSliceMut};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd};
use rustix::net::{RecvAncillaryBuffer, RecvFlags};
use socket2::SockRef;

/// What [`Socket::wait`] watches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Interest {
    /// Input (or end of stream).
    pub(crate) read: bool,
    /// Room in the send buffer.
    pub(crate) write: bool,
    /// The bell.
    pub(crate) bell: bool,
}

/// A connected socket plus bell.
#[derive(Debug)]
pub(crate) struct Socket {
    stream: TcpStream,
    bell: OwnedFd,
    /// The receive low-water mark last set (see [`Socket::set_read_mark`]).
    read_mark: AtomicUsize,
    /// Calls of [`Socket::wait`] (tests tell sleeps in poll from sleeps in a receive).
    #[cfg(test)]
    pub(crate) polls: AtomicUsize,
    /// The local and the peer's port (tests count reads per connection, see [`watch`]).
    #[cfg(test)]
    ports: [u16; 2],
}

/// Counts the non-blocking receives that found nothing, on the connections of one port
/// (tests only: each test that counts uses a port of its own).
#[cfg(test)]
pub(crate) mod watch {
    use std::sync::atomic::{AtomicU16, AtomicUsize};

    /// The port whose connections (as local or peer port) are counted; 0 for none.
    pub(crate) static PORT: AtomicU16 = AtomicU16::new(0);
    /// Receives that found nothing on those connections.
    pub(crate) static EMPTY_READS: AtomicUsize = AtomicUsize::new(0);
}

/// True for errors that only mean "try again".
pub(crate) fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Longest blocking receive ([`Socket::recv_wait`]): the socket's receive timeout.
pub(crate) const RECV_WAIT: Duration = Duration::from_millis(50);

impl Socket {
    /// Wraps a connected stream: TCP_NODELAY set; blocking (every transfer but
    /// [`Socket::recv_wait`] passes `MSG_DONTWAIT`), with [`RECV_WAIT`] as its receive
    /// timeout.
    pub(crate) fn new(stream: TcpStream) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(RECV_WAIT))?;
        let bell = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        #[cfg(test)]
        let ports = [
            stream.local_addr().map_or(0, |a| a.port()),
            stream.peer_addr().map_or(0, |a| a.port()),
        ];
        Ok(Self {
            stream,
            bell,
            read_mark: AtomicUsize::new(1),
            #[cfg(test)]
            polls: AtomicUsize::new(0),
            #[cfg(test)]
            ports,
        })
    }

    /// Sends what fits of `bufs` without blocking; never raises SIGPIPE.
    pub(crate) fn send(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        SockRef::from(&self.stream)
            .send_vectored_with_flags(bufs, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
    }

    /// Sets how many bytes must have arrived before [`Socket::wait`] reports input (the
    /// receive low-water mark; 1 is the default). Whoever waits for input sets it first, from
    /// what it expects: a payload streaming in wakes it once per chunk, not per segment. A
    /// failure (not expected on Linux) only costs wake-ups: the mark then stays as it was.
    /// Linux (since 4.18) grows the receive buffer and window to fit the mark, so the bytes
    /// it waits for can arrive; the mark never exceeds what the peer has yet to send of a
    /// payload it started, and a wait still ends at the peer's end of stream or error.
    pub(crate) fn set_read_mark(&self, bytes: usize) {
        let bytes = bytes.max(1);
        if self.read_mark.load(Ordering::Relaxed) == bytes {
            return;
        }
        match super::lowat::set(self.stream.as_fd(), bytes) {
            Ok(()) => self.read_mark.store(bytes, Ordering::Relaxed),
            Err(e) => tracing::debug!(error = %e, "soft transport: SO_RCVLOWAT"),
        }
    }

    /// Like [`Socket::send`], for bytes that more will follow at once (`MSG_MORE`): the
    /// kernel holds them back to go out with the next send, not in a segment of their own.
    pub(crate) fn send_more(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        SockRef::from(&self.stream).send_vectored_with_flags(
            bufs,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT | libc::MSG_MORE,
        )
    }

    /// Receives what has arrived into `dst` without blocking; `Ok(0)` is end of stream.
    pub(crate) fn recv(&self, dst: &mut [u8]) -> io::Result<usize> {
        let got = rustix::net::recv(&self.stream, dst, RecvFlags::DONTWAIT).map(|(n, _)| n);
        #[cfg(test)]
        self.count_empty(got.is_err_and(|e| e == rustix::io::Errno::AGAIN));
        got.map_err(io::Error::from)
    }

    #[cfg(test)]
    fn count_empty(&self, empty: bool) {
        let port = watch::PORT.load(Ordering::Relaxed);
        if empty && port != 0 && self.ports.contains(&port) {
            watch::EMPTY_READS.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Receives into `dst`, sleeping until input arrives (as many bytes as the read mark
    /// asks, or the end of stream) or [`RECV_WAIT`] passes (`WouldBlock`, as also while a
    /// `splice` has the socket non-blocking); `Ok(0)` is end of stream.
    pub(crate) fn recv_wait(&self, dst: &mut [u8]) -> io::Result<usize> {
        rustix::net::recv(&self.stream, dst, RecvFlags::empty())
            .map(|(n, _)| n)
            .map_err(io::Error::from)
    }

    /// Receives what has arrived into `bufs` in order, without blocking; `Ok(0)` is end of
    /// stream.
    pub(crate) fn recv_vectored(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        let mut control = RecvAncillaryBuffer::default();
        let got = rustix::net::recvmsg(&self.stream, bufs, &mut control, RecvFlags::DONTWAIT)
            .map(|m| m.bytes);
        #[cfg(test)]
        self.count_empty(got.is_err_and(|e| e == rustix::io::Errno::AGAIN));
        got.map_err(io::Error::from)
    }

    /// Runs `io` on the socket's descriptor with the socket non-blocking, for calls that
    /// take no per-call flag for it (`splice`); a [`Socket::recv_wait`] that starts
    /// meanwhile returns `WouldBlock` at once.
    pub(crate) fn nonblocking<T>(
        &self,
        io: impl FnOnce(BorrowedFd<'_>) -> io::Result<T>,
    ) -> io::Result<T> {
        rustix::io::ioctl_fionbio(&self.stream, true)?;
        let out = io(self.stream.as_fd());
        if let Err(e) = rustix::io::ioctl_fionbio(&self.stream, false) {
            // Left non-blocking, a blocking receive only turns into a poll and a receive.
            tracing::debug!(error = %e, "soft transport: FIONBIO");
        }
        out
    }

    /// Sends all of `bufs`, waiting for room up to `deadline`.
    pub(crate) fn send_all(&self, bufs: &mut [IoSlice<'_>], deadline: Instant) -> io::Result<()> {
        let mut bufs = bufs;
        while !bufs.is_empty() {
            match self.send(bufs) {
                Ok(n) => IoSlice::advance_slices(&mut bufs, n),
                Err(e) if transient(&e) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                    let write = Interest {
                        write: true,
                        ..Interest::default()
                    };
                    self.wait(write, Some(left));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Waits until something in `interest` is ready or `timeout` passes; clears the bell if
    /// it rang. Returns false on timeout.
    pub(crate) fn wait(&self, interest: Interest, timeout: Option<Duration>) -> bool {
        #[cfg(test)]
        self.polls.fetch_add(1, Ordering::Relaxed);
        // (A timeout beyond `Timespec`'s range is no different from none.)
        let ts = timeout.and_then(|t| Timespec::try_from(t).ok());
        let mut flags = PollFlags::empty();
        if interest.read {
            flags |= PollFlags::IN;
        }
        if interest.write {
            flags |= PollFlags::OUT;
        }
        let mut fds = [
            PollFd::new(&self.stream, flags),
            PollFd::new(&self.bell, PollFlags::IN),
        ];
        let n = if interest.bell { 2 } else { 1 };
        match rustix::event::poll(&mut fds[..n], ts.as_ref()) {
            Ok(0) => false,
            Ok(_) => {
                if n == 2 && !fds[1].revents().is_empty() {
                    let mut count = [0u8; 8];
                    // Non-blocking: an error only means it was clear already.
                    let _ = rustix::io::read(&self.bell, &mut count);
                }
                true
            }
            // EINTR: let the caller look again.
            Err(_) => true,
        }
    }

    /// True once the peer has closed its side (its FIN or a reset arrived), whether or not
    /// the input before it was read. Never blocks.
    pub(crate) fn peer_hung_up(&self) -> bool {
        let mut fds = [PollFd::new(&self.stream, PollFlags::RDHUP)];
        match rustix::event::poll(&mut fds, Some(&Timespec::default())) {
            Ok(_) => fds[0]
                .revents()
                .intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR),
            // EINTR: nothing known.
            Err(_) => false,
        }
    }

    /// Rings the bell (wakes a thread waiting with `bell` interest).
    pub(crate) fn ring(&self) {
        if let Err(e) = rustix::io::write(&self.bell, &1u64.to_ne_bytes()) {
            tracing::trace!(error = %e, "soft transport: bell");
        }
    }

    /// Shuts the socket down in `how` direction(s); errors (already closed) are irrelevant.
    pub(crate) fn shutdown(&self, how: Shutdown) {
        if let Err(e) = self.stream.shutdown(how) {
            tracing::trace!(error = %e, "soft transport: shutdown");
        }
    }

    /// Aborts the connection: the peer gets an RST, and every later transfer on this socket
    /// fails (fault injection). The descriptor stays open until the socket is dropped.
    #[cfg(feature = "fault-injection")]
    pub(crate) fn abort(&self) {
        // connect(AF_UNSPEC) disconnects a TCP socket with a reset, without closing it under
        // the threads that use it.
        if let Err(e) = rustix::net::connect_unspec(&self.stream) {
            tracing::debug!(error = %e, "soft transport: abort");
        }
    }

    /// The stream itself (blocking: transfers go through this type's methods).
    pub(crate) fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// The socket's descriptor (to watch it beside others).
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }

    /// The peer's address.
    pub(crate) fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.stream.peer_addr().ok()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;
    use std::net::TcpListener;

    use super::*;

    /// A connected pair: the peer's plain stream and our [`Socket`].
    pub(crate) fn pair() -> (TcpStream, Socket) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, _) = listener.accept().unwrap();
        (peer, Socket::new(ours).unwrap())
    }

    /// The peer's close shows at once, with its last input still unread; our own shutdown is
    /// no hang-up.
    #[test]
    fn a_peer_that_closed_is_seen_before_its_input_is_read() {
        let (mut peer, socket) = pair();
        assert!(!socket.peer_hung_up());
        peer.write_all(b"last words").unwrap();
        assert!(!socket.peer_hung_up(), "input alone is no hang-up");
        peer.shutdown(Shutdown::Write).unwrap();
        // Loopback delivers the FIN within the shutdown call; allow for a slow machine.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.peer_hung_up() {
            assert!(Instant::now() < deadline, "the peer's FIN was not seen");
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut buf = [0u8; 16];
        assert_eq!(
            socket.recv(&mut buf).unwrap(),
            10,
            "the input is still there"
        );
        // Our own side shut for writing is not the peer's hang-up.
        let (peer, socket) = pair();
        socket.shutdown(Shutdown::Write);
        assert!(!socket.peer_hung_up());
        drop(peer);
        while !socket.peer_hung_up() {
            assert!(Instant::now() < deadline, "the peer's close was not seen");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A blocking receive sleeps until input arrives and returns it; with nothing coming it
    /// ends after the receive timeout; while the socket is non-blocking for a `splice` it
    /// returns at once, and blocks again afterwards. Non-blocking receives never block.
    #[test]
    fn a_blocking_receive_sleeps_until_input_or_its_timeout() {
        let (mut peer, socket) = pair();
        // "Did not block" is told against a receive timeout far longer than any stall of a
        // busy machine; "blocked until its timeout" against the real one.
        const LONG: Duration = Duration::from_secs(20);
        socket.stream().set_read_timeout(Some(LONG)).unwrap();
        let mut buf = [0u8; 16];
        let start = Instant::now();
        let err = socket.recv(&mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        let mut empty = [IoSliceMut::new(&mut buf)];
        let err = socket.recv_vectored(&mut empty).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(start.elapsed() < LONG / 2, "a non-blocking receive blocked");

        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            peer.write_all(b"hello").unwrap();
            peer
        });
        let start = Instant::now();
        assert_eq!(socket.recv_wait(&mut buf).unwrap(), 5);
        assert!(start.elapsed() >= Duration::from_millis(15));
        assert_eq!(&buf[..5], b"hello");
        let _peer = writer.join().unwrap();

        let start = Instant::now();
        let err = socket
            .nonblocking(|_| socket.recv_wait(&mut buf))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(start.elapsed() < LONG / 2, "blocked while non-blocking");

        socket.stream().set_read_timeout(Some(RECV_WAIT)).unwrap();
        let start = Instant::now();
        let err = socket.recv_wait(&mut buf).unwrap_err();
        assert!(transient(&err), "{err}");
        assert!(
            start.elapsed() >= RECV_WAIT / 2,
            "returned before its timeout, or left non-blocking"
        );
    }
}

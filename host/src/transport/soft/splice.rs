//! Sending large payloads without copying them: `vmsplice` puts references to the payload's
//! pages into a pipe, and `splice` moves them on into the TCP socket, so the kernel sends from
//! registered memory itself instead of copying it into socket buffers first (on loopback the
//! receiver's copy is then the only one). Like an RDMA NIC, the kernel reads the memory after
//! the call has returned, until the bytes have left: a payload changed before its work request
//! completes may arrive changed, which the RC contract leaves undefined anyway (a completion
//! means the peer acknowledged the bytes, so they left the sender's kernel before it).
//!
//! A `splice` into a socket whose peer is gone raises `SIGPIPE` (it has no `MSG_NOSIGNAL`),
//! which kills a C program that keeps the default action: [`SplicePipe::drain_into`] blocks the
//! signal in the calling thread for the call and takes back a `SIGPIPE` the call raised.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::pipe::{IoSliceRaw, PipeFlags, SpliceFlags};

/// A pipe through which payload pages reach a socket.
#[derive(Debug)]
pub(crate) struct SplicePipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
}

impl SplicePipe {
    /// A non-blocking pipe, grown to `capacity` bytes if the system allows it (a user over
    /// the pipe quota gets a smaller one; its real capacity is [`SplicePipe::capacity`]).
    pub(crate) fn new(capacity: usize) -> io::Result<Self> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        if let Err(e) = rustix::pipe::fcntl_setpipe_size(&write, capacity) {
            tracing::debug!(error = %e, "soft transport: F_SETPIPE_SZ");
        }
        let capacity = rustix::pipe::fcntl_getpipe_size(&write)?;
        Ok(Self {
            read,
            write,
            capacity,
        })
    }

    /// Bytes the pipe holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Puts references to the pages of `src` (at most [`SplicePipe::capacity`] bytes of it)
    /// into the pipe, without blocking; returns how many bytes it took.
    pub(crate) fn map(&self, src: &[u8]) -> io::Result<usize> {
        let src = &src[..src.len().min(self.capacity)];
        let iov = [IoSliceRaw::from_slice(src)];
        // SAFETY: `write` is the pipe's write end, so the kernel only reads `src` (it never
        // writes through these references). It takes references to the pages, which stay
        // valid memory for as long as the kernel holds them, whatever happens to `src`
        // afterwards; what the bytes are then is the caller's contract (module docs).
        let n = unsafe { rustix::pipe::vmsplice(&self.write, &iov, SpliceFlags::NONBLOCK) }?;
        Ok(n)
    }

    /// Moves up to `len` bytes from the pipe into `socket` (which must be non-blocking),
    /// without raising `SIGPIPE`; returns how many bytes moved.
    pub(crate) fn drain_into(&self, socket: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
        crate::transport::soft::sigpipe::suppressed(|| {
            rustix::pipe::splice(
                self.read.as_fd(),
                None,
                socket,
                None,
                len,
                SpliceFlags::NONBLOCK,
            )
            .map_err(io::Error::from)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    use super::*;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (peer, _) = listener.accept().unwrap();
        ours.set_nonblocking(true).unwrap();
        (ours, peer)
    }

    /// Every byte mapped into the pipe arrives at the peer, in order, across several maps
    /// and partial drains.
    #[test]
    fn mapped_bytes_arrive_in_order() {
        let (ours, mut peer) = pair();
        let pipe = SplicePipe::new(256 * 1024).unwrap();
        assert!(pipe.capacity() >= 4096);
        let payload: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; 1_000_000];
            peer.read_exact(&mut got).map(|()| got)
        });
        let mut done = 0;
        while done < payload.len() {
            let mapped = pipe.map(&payload[done..]).unwrap();
            assert!(mapped > 0);
            let mut left = mapped;
            while left > 0 {
                match pipe.drain_into(ours.as_fd(), left) {
                    Ok(n) => left -= n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                    Err(e) => panic!("splice: {e}"),
                }
            }
            done += mapped;
        }
        assert!(reader.join().unwrap().unwrap() == payload);
    }

    /// Marks the child process of [`a_splice_into_a_broken_connection_spares_the_process`].
    const CHILD: &str = "NAAICE_SPLICE_SIGPIPE_CHILD";

    /// A splice into a connection the peer reset fails with `EPIPE`, and a process that keeps
    /// `SIGPIPE`'s default action (as C programs do; Rust sets it to ignored) lives on. The
    /// test runs itself again in a child process with the default action, since the signal
    /// would end the process that runs it.
    #[test]
    fn a_splice_into_a_broken_connection_spares_the_process() {
        if std::env::var_os(CHILD).is_none() {
            let status = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "transport::soft::splice::tests::a_splice_into_a_broken_connection_spares_the_process",
                    "--test-threads=1",
                ])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let out = String::from_utf8_lossy(&status.stdout);
            assert!(status.status.success(), "child: {:?}\n{out}", status.status);
            assert!(
                out.contains("1 passed"),
                "the child did not run the test:\n{out}"
            );
            return;
        }
        // SAFETY: restores the default action of SIGPIPE (terminate) in this child process,
        // which runs this test alone.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        let (ours, peer) = pair();
        socket2::SockRef::from(&peer)
            .set_linger(Some(std::time::Duration::ZERO))
            .unwrap();
        drop(peer);
        std::thread::sleep(std::time::Duration::from_millis(50));
        // The first send takes the reset's error (ECONNRESET); the splice then finds the
        // connection broken.
        let _ = rustix::net::send(&ours, &[1], rustix::net::SendFlags::NOSIGNAL);
        let pipe = SplicePipe::new(64 * 1024).unwrap();
        assert_eq!(pipe.map(&[9u8; 10_000]).unwrap(), 10_000);
        let err = pipe.drain_into(ours.as_fd(), 10_000).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPIPE), "{err}");
    }
}

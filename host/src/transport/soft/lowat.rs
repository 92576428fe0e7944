//! The socket's receive low-water mark (`SO_RCVLOWAT`): how many bytes must have arrived
//! before `poll` reports the socket readable. Neither `rustix` nor `socket2` sets it, so this
//! is the one system call of the software transport made through `libc`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Sets `SO_RCVLOWAT` of the TCP socket `fd` to `bytes` (at least 1; Linux caps it at half
/// the largest receive buffer and grows the buffer to fit it).
pub(super) fn set(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes.max(1)).unwrap_or(libc::c_int::MAX);
    let len = libc::socklen_t::try_from(size_of::<libc::c_int>()).unwrap_or(4);
    // SAFETY: `fd` is a live socket (borrowed for the call); the option value points at a
    // `c_int` on the stack that outlives the call, with its exact size as the length.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            std::ptr::from_ref(&value).cast(),
            len,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;
    use std::time::Duration;

    use rustix::event::{PollFd, PollFlags, Timespec, poll};

    use super::*;

    fn readable(s: &TcpStream) -> bool {
        let mut fds = [PollFd::new(s, PollFlags::IN)];
        let ts = Timespec {
            tv_sec: 0,
            tv_nsec: 200_000_000,
        };
        poll(&mut fds, Some(&ts)).unwrap() > 0
    }

    /// With the mark at 1000 bytes, 600 arrived bytes do not make the socket readable, 1000
    /// do; back at 1, any byte does.
    #[test]
    fn poll_waits_for_the_mark() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, _) = listener.accept().unwrap();
        set(ours.as_fd(), 1000).unwrap();
        peer.write_all(&[7; 600]).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(!readable(&ours), "readable below the mark");
        peer.write_all(&[7; 400]).unwrap();
        assert!(readable(&ours), "not readable at the mark");
        set(ours.as_fd(), 1).unwrap();
        assert!(readable(&ours));
    }
}

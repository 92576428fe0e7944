//! Keeping `SIGPIPE` away from the application: a system call that writes into a socket
//! without `MSG_NOSIGNAL` (`splice`) raises it when the peer is gone, and its default action
//! ends the process. [`suppressed`] blocks the signal in the calling thread for the call and
//! takes back the one the call raised, the way libraries that cannot rely on a process-wide
//! `SIG_IGN` do it. Neither `rustix` nor `socket2` offers signal masks, so this goes through
//! `libc`.

use std::io;
use std::mem::MaybeUninit;

/// A signal set holding `SIGPIPE` alone.
fn sigpipe_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigemptyset` initialises the set it is given (it cannot fail for a valid
    // pointer); `sigaddset` then adds a valid signal number to the initialised set.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGPIPE);
        set.assume_init()
    }
}

/// True if `SIGPIPE` is pending for the calling thread (or the process).
fn sigpipe_pending() -> bool {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigpending` fills the set it is given; on failure (not possible with a valid
    // pointer) it is emptied first so that it is initialised either way.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigpending(set.as_mut_ptr());
        libc::sigismember(set.as_ptr(), libc::SIGPIPE) == 1
    }
}

/// Runs `call` with `SIGPIPE` blocked in this thread; a `SIGPIPE` that became pending during
/// the call (none was before) is taken back before the mask is restored. Whatever the call
/// returned: a `splice` that moved some bytes before the peer went away returns their count,
/// yet raised the signal (unblocked, it would end the process).
pub(crate) fn suppressed<T>(call: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    let pipe = sigpipe_set();
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: both sets are valid; `old` is written by the call (it cannot fail with
    // SIG_BLOCK and valid pointers, and is checked anyway).
    let blocked = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, old.as_mut_ptr()) } == 0;
    let was_pending = blocked && sigpipe_pending();
    let result = call();
    if blocked {
        if !was_pending && sigpipe_pending() {
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: valid set and timeout; no siginfo wanted (null is allowed).
            unsafe { libc::sigtimedwait(&pipe, std::ptr::null_mut(), &zero) };
        }
        // SAFETY: `old` was initialised by the successful `pthread_sigmask` above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut()) };
    }
    result
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    use super::*;

    /// A call that raised `SIGPIPE` and still succeeded (a `splice` that moved part of its
    /// bytes before the peer went away): the signal is taken back all the same. The test
    /// thread keeps `SIGPIPE` blocked, so a signal left behind would stay pending (and be
    /// seen) instead of being delivered.
    #[test]
    fn a_signal_raised_by_a_call_that_succeeded_is_taken_back() {
        let pipe = sigpipe_set();
        let mut before = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: valid sets.
        assert_eq!(
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, before.as_mut_ptr()) },
            0
        );
        assert!(!sigpipe_pending());
        let result = suppressed(|| {
            // SAFETY: sends SIGPIPE to this very thread, which blocks it, so it stays pending
            // as one the kernel raises for a write does.
            assert_eq!(
                unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGPIPE) },
                0
            );
            assert!(sigpipe_pending(), "the signal is pending inside the call");
            Ok(5)
        });
        assert_eq!(result.unwrap(), 5);
        assert!(!sigpipe_pending(), "SIGPIPE left pending");
        // SAFETY: `before` was initialised above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, before.as_ptr(), std::ptr::null_mut()) };
    }

    /// A write without `MSG_NOSIGNAL` into a socket whose peer reset it: the call fails
    /// with `EPIPE`, and afterwards no `SIGPIPE` is pending and the mask is as before. The
    /// thread keeps `SIGPIPE` blocked during the test, so a signal the helper failed to take
    /// back would stay pending here (and be seen), whatever the process does with it.
    #[test]
    fn a_broken_pipe_leaves_no_signal_behind() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (peer, _) = listener.accept().unwrap();
        socket2::SockRef::from(&peer)
            .set_linger(Some(std::time::Duration::ZERO))
            .unwrap();
        drop(peer);
        // The reset arrives, and a first write takes its error (ECONNRESET): the next one
        // finds the connection broken (EPIPE).
        std::thread::sleep(std::time::Duration::from_millis(50));
        let _ = (&ours).write(&[1]);

        let pipe = sigpipe_set();
        let mut before = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: valid sets.
        assert_eq!(
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, before.as_mut_ptr()) },
            0
        );
        assert!(!sigpipe_pending());
        let fd = ours.as_raw_fd();
        let result = suppressed(|| {
            // SAFETY: a valid socket and a one-byte buffer on the stack; flags 0 means that
            // the kernel raises SIGPIPE on a broken connection.
            let n = unsafe { libc::send(fd, [7u8].as_ptr().cast(), 1, 0) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n)
            }
        });
        let err = result.expect_err("a send to a reset connection");
        assert_eq!(err.raw_os_error(), Some(libc::EPIPE), "{err}");
        assert!(!sigpipe_pending(), "SIGPIPE left pending");
        // The mask still blocks SIGPIPE (it did before the call); then restore the test's.
        let mut now = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: valid sets; `before` was initialised above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, before.as_ptr(), now.as_mut_ptr());
            assert_eq!(libc::sigismember(now.as_ptr(), libc::SIGPIPE), 1);
        }
    }
}

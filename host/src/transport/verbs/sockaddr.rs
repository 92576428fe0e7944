//! Conversions between [`SocketAddr`] and the C socket addresses rdma_cm takes and returns.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// A C socket address (`sockaddr_storage`) built from a [`SocketAddr`].
pub(super) struct CSockAddr {
    storage: libc::sockaddr_storage,
}

impl CSockAddr {
    /// The C form of `addr`.
    pub(super) fn new(addr: SocketAddr) -> Self {
        // SAFETY: `sockaddr_storage` is plain old data; all-zero bytes are a valid value.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*a.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: `sockaddr_storage` is larger than and suitably aligned for
                // `sockaddr_in`.
                unsafe { std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in>(), sin) };
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo().to_be(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: `sockaddr_storage` is larger than and suitably aligned for
                // `sockaddr_in6`.
                unsafe { std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in6>(), sin6) };
            }
        }
        Self { storage }
    }

    /// Pointer for the C calls (which do not write through it).
    pub(super) fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        (&raw mut self.storage).cast()
    }
}

/// Reads a C socket address of family `AF_INET` or `AF_INET6`.
///
/// # Safety
/// `sa` must point to a socket address whose storage is as large as its family demands
/// (rdma_cm keeps addresses in `sockaddr_storage`-sized fields).
pub(super) unsafe fn from_c(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: `sa` is non-null and points to a socket address (caller).
    let family = i32::from(unsafe { (*sa).sa_family });
    match family {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a `sockaddr_in` (caller: large enough).
            let sin = unsafe { std::ptr::read_unaligned(sa.cast::<libc::sockaddr_in>()) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a `sockaddr_in6`.
            let sin6 = unsafe { std::ptr::read_unaligned(sa.cast::<libc::sockaddr_in6>()) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_v4_and_v6() {
        for s in [
            "10.77.0.1:12345",
            "0.0.0.0:0",
            "[::1]:7",
            "[fe80::1%3]:4791",
        ] {
            let addr: SocketAddr = s.parse().unwrap();
            let mut c = CSockAddr::new(addr);
            // SAFETY: `c` holds a full `sockaddr_storage`.
            let back = unsafe { from_c(c.as_mut_ptr()) };
            assert_eq!(back, Some(addr), "{s}");
        }
        // SAFETY: null is handled.
        assert_eq!(unsafe { from_c(std::ptr::null()) }, None);
    }
}

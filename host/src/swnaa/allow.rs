//! Access control of the software NAA: the address prefixes its clients may come from.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address prefix such as `10.0.0.0/24`, `fd00::/8` or a single address (`10.0.0.5`, all
/// bits).
///
/// IPv4 and IPv4-mapped IPv6 addresses (`::ffff:10.0.0.5`, as a dual-stack listener on `::`
/// sees IPv4 clients) are one address space: an IPv4 prefix matches a mapped peer, an
/// IPv4-mapped prefix (`::ffff:10.0.0.0/104`) matches what `10.0.0.0/8` matches, and an IPv6
/// prefix that spans the mapped range (`::/0`, `::ffff:0:0/96`) matches IPv4 peers too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressPrefix {
    addr: IpAddr,
    len: u8,
}

impl AddressPrefix {
    /// True if `peer` lies inside this prefix.
    pub fn contains(&self, peer: IpAddr) -> bool {
        // Compare in IPv6 space, IPv4 as IPv4-mapped (`::ffff:a.b.c.d`, the top 96 bits).
        let (net, len) = match self.addr {
            IpAddr::V4(v4) => (v4.to_ipv6_mapped(), self.len.saturating_add(96)),
            IpAddr::V6(v6) => (v6, self.len),
        };
        let peer = match peer {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        masked(u128::from(net), len) == masked(u128::from(peer), len)
    }
}

/// The top `len` bits of `value`.
fn masked(value: u128, len: u8) -> u128 {
    let len = u32::from(len).min(128);
    if len == 0 {
        return 0;
    }
    value >> (128 - len)
}

/// A prefix that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not an address prefix (such as 10.0.0.0/24, fd00::/8 or 10.0.0.5): {why}")]
pub struct ParsePrefixError {
    input: String,
    why: &'static str,
}

impl FromStr for AddressPrefix {
    type Err = ParsePrefixError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let fail = |why| ParsePrefixError {
            input: s.to_owned(),
            why,
        };
        let (addr, len) = match s.trim().split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| fail("bad address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => l.parse::<u8>().ok().filter(|&l| l <= max).ok_or_else(|| {
                fail(if max == 32 {
                    "length not 0..=32"
                } else {
                    "length not 0..=128"
                })
            })?,
        };
        Ok(Self { addr, len })
    }
}

impl fmt::Display for AddressPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// True if `peer` may connect: the list is empty (everyone may) or a prefix contains it. An
/// unknown peer address is allowed only by an empty list.
pub(crate) fn allowed(allow: &[AddressPrefix], peer: Option<IpAddr>) -> bool {
    allow.is_empty() || peer.is_some_and(|p| allow.iter().any(|prefix| prefix.contains(p)))
}

/// The allow list as one line for logs and rejection reasons (`10.0.0.0/24, fd00::/8`).
pub(crate) fn describe(allow: &[AddressPrefix]) -> String {
    allow
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> AddressPrefix {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_match_their_addresses_only() {
        assert!(p("10.0.0.0/24").contains(ip("10.0.0.77")));
        assert!(!p("10.0.0.0/24").contains(ip("10.0.1.1")));
        assert!(p("10.0.0.0/24").contains(ip("::ffff:10.0.0.9")));
        assert!(p("10.0.0.5").contains(ip("10.0.0.5")));
        assert!(!p("10.0.0.5").contains(ip("10.0.0.6")));
        assert!(p("0.0.0.0/0").contains(ip("192.0.2.1")));
        assert!(!p("0.0.0.0/0").contains(ip("fd00::1")));
        assert!(p("fd00::/8").contains(ip("fd12::1")));
        assert!(!p("fd00::/8").contains(ip("fe80::1")));
        assert!(p("::/0").contains(ip("2001:db8::1")));
        assert!(p("127.0.0.1/8").contains(ip("127.1.2.3")));
    }

    #[test]
    fn ipv4_and_ipv4_mapped_addresses_are_one_space() {
        // `::/0` admits everyone, IPv4 clients of a dual-stack listener included.
        for peer in ["192.0.2.1", "::ffff:192.0.2.1", "2001:db8::1", "::1"] {
            assert!(p("::/0").contains(ip(peer)), "{peer}");
        }
        // An IPv4-mapped prefix is its IPv4 prefix, whichever form the peer has.
        for peer in ["10.1.2.3", "::ffff:10.1.2.3"] {
            assert!(p("::ffff:10.0.0.0/104").contains(ip(peer)), "{peer}");
            assert!(p("10.0.0.0/8").contains(ip(peer)), "{peer}");
            assert!(p("::ffff:0:0/96").contains(ip(peer)), "{peer}");
        }
        for peer in ["11.0.0.1", "::ffff:11.0.0.1", "fd00::a00:1", "::a00:1"] {
            assert!(!p("::ffff:10.0.0.0/104").contains(ip(peer)), "{peer}");
            assert!(!p("10.0.0.0/8").contains(ip(peer)), "{peer}");
        }
        assert!(p("::ffff:10.0.0.5").contains(ip("10.0.0.5")));
        assert!(!p("::ffff:0:0/96").contains(ip("fd00::1")));
        assert!(!p("0.0.0.0/0").contains(ip("::1")));
        assert!(allowed(&[p("::/0")], Some(ip("::ffff:127.0.0.1"))));
    }

    #[test]
    fn bad_prefixes_are_clear_errors() {
        for bad in [
            "",
            "10.0.0/24",
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0.0/x",
            "host/8",
        ] {
            let e = bad.parse::<AddressPrefix>().unwrap_err().to_string();
            assert!(e.contains("not an address prefix"), "{bad}: {e}");
        }
        assert_eq!(p(" 10.1.0.0/16 ").to_string(), "10.1.0.0/16");
        assert_eq!(p("fd00::1").to_string(), "fd00::1/128");
    }

    #[test]
    fn an_empty_list_allows_everyone_and_a_list_only_its_prefixes() {
        assert!(allowed(&[], None));
        assert!(allowed(&[], Some(ip("192.0.2.1"))));
        let list = [p("10.0.0.0/24"), p("10.0.9.0/24")];
        assert!(allowed(&list, Some(ip("10.0.9.3"))));
        assert!(!allowed(&list, Some(ip("10.0.8.3"))));
        assert!(!allowed(&list, None));
        assert_eq!(describe(&list), "10.0.0.0/24, 10.0.9.0/24");
    }
}

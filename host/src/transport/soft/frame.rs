//! Wire framing of the software transport.
//!
//! Every frame starts with the same 24-byte header (all fields big-endian); data frames and
//! REJECT are followed by `len` payload bytes, every other frame has none:
//!
//! ```text
//!  0      opcode
//!  1      flags (bit 0: solicited event; data frames only)
//!  2..4   reserved, 0
//!  4..8   len: payload length
//!  8..12  rkey                              (WRITE, WRITE_IMM)
//! 12..16  imm / version / NAK syndrome      (WRITE_IMM / HELLO, ACCEPT / NAK)
//! 16..24  remote address / msn / magic      (WRITE, WRITE_IMM / ACK, NAK / HELLO, ACCEPT)
//! ```
//!
//! Data messages (SEND, WRITE, WRITE_IMM) are numbered implicitly 1, 2, 3 … in stream order
//! (the message sequence number, msn); ACK carries the highest msn the responder has placed
//! (cumulative), NAK the msn it refused and why.

use crate::transport::{RemoteAddr, WcStatus};

/// Length of every frame header.
pub(crate) const HDR_LEN: usize = 24;
/// Handshake magic ("NAAICESW").
pub(crate) const MAGIC: u64 = u64::from_be_bytes(*b"NAAICESW");
/// Protocol version of this framing.
pub(crate) const VERSION: u32 = 1;
/// Longest reject reason accepted from the wire (longer ones are a protocol violation).
pub(crate) const MAX_REASON: usize = 256;
/// Longest catalog (the kernels an NAA serves) accepted from the wire.
pub(crate) const MAX_CATALOG: usize = 64 * 1024;

const OP_HELLO: u8 = 1;
const OP_ACCEPT: u8 = 2;
const OP_REJECT: u8 = 3;
const OP_SEND: u8 = 4;
const OP_WRITE: u8 = 5;
const OP_WRITE_IMM: u8 = 6;
const OP_ACK: u8 = 7;
const OP_NAK: u8 = 8;
const OP_DREQ: u8 = 9;
const OP_NOP: u8 = 10;
const OP_CATALOG_REQUEST: u8 = 11;
const OP_CATALOG: u8 = 12;

const FLAG_SOLICITED: u8 = 1;

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// Connection request (client → server).
    Hello,
    /// Connection accepted (server → client).
    Accept,
    /// Instead of HELLO (client → server): what do you serve? The server answers CATALOG
    /// and closes; a server that does not know it closes at once.
    CatalogRequest,
    /// The answer to CATALOG_REQUEST; `len` bytes of UTF-8 text follow (one `CODE NAME`
    /// line per kernel).
    Catalog {
        /// Text length.
        len: u32,
    },
    /// Connection refused; `len` bytes of UTF-8 reason follow.
    Reject {
        /// Reason length.
        len: u32,
    },
    /// Two-sided SEND of `len` bytes.
    Send {
        /// Payload length.
        len: u32,
        /// Solicited event.
        solicited: bool,
    },
    /// RDMA WRITE of `len` bytes to `remote`.
    Write {
        /// Payload length.
        len: u32,
        /// Target.
        remote: RemoteAddr,
    },
    /// RDMA WRITE WITH IMMEDIATE.
    WriteImm {
        /// Payload length.
        len: u32,
        /// Target.
        remote: RemoteAddr,
        /// Immediate (host order).
        imm: u32,
        /// Solicited event.
        solicited: bool,
    },
    /// Cumulative acknowledgement: every data message up to `msn` has been placed.
    Ack {
        /// Highest placed message.
        msn: u64,
    },
    /// Negative acknowledgement: message `msn` was refused (earlier ones were placed).
    Nak {
        /// The refused message.
        msn: u64,
        /// Completion status for the initiator.
        status: WcStatus,
    },
    /// Orderly disconnect request.
    Dreq,
    /// Keep-alive (the responder is busy, e.g. waiting for a receive).
    Nop,
}

impl Frame {
    /// Encodes the header.
    pub(crate) fn encode(&self) -> [u8; HDR_LEN] {
        let (op, flags, len, rkey, imm, addr) = match *self {
            Self::Hello => (OP_HELLO, 0, 0, 0, VERSION, MAGIC),
            Self::Accept => (OP_ACCEPT, 0, 0, 0, VERSION, MAGIC),
            Self::CatalogRequest => (OP_CATALOG_REQUEST, 0, 0, 0, VERSION, MAGIC),
            Self::Catalog { len } => (OP_CATALOG, 0, len, 0, VERSION, MAGIC),
            Self::Reject { len } => (OP_REJECT, 0, len, 0, 0, 0),
            Self::Send { len, solicited } => (OP_SEND, flag(solicited), len, 0, 0, 0),
            Self::Write { len, remote } => (OP_WRITE, 0, len, remote.rkey, 0, remote.addr),
            Self::WriteImm {
                len,
                remote,
                imm,
                solicited,
            } => (
                OP_WRITE_IMM,
                flag(solicited),
                len,
                remote.rkey,
                imm,
                remote.addr,
            ),
            Self::Ack { msn } => (OP_ACK, 0, 0, 0, 0, msn),
            Self::Nak { msn, status } => (OP_NAK, 0, 0, 0, syndrome(status), msn),
            Self::Dreq => (OP_DREQ, 0, 0, 0, 0, 0),
            Self::Nop => (OP_NOP, 0, 0, 0, 0, 0),
        };
        let mut out = [0u8; HDR_LEN];
        out[0] = op;
        out[1] = flags;
        out[4..8].copy_from_slice(&len.to_be_bytes());
        out[8..12].copy_from_slice(&rkey.to_be_bytes());
        out[12..16].copy_from_slice(&imm.to_be_bytes());
        out[16..24].copy_from_slice(&addr.to_be_bytes());
        out
    }

    /// Decodes and validates a header from the wire.
    pub(crate) fn decode(raw: &[u8; HDR_LEN]) -> Result<Self, &'static str> {
        let op = raw[0];
        let flags = raw[1];
        let be32 = |at: usize| u32::from_be_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]);
        let len = be32(4);
        let rkey = be32(8);
        let imm = be32(12);
        let mut a = [0u8; 8];
        a.copy_from_slice(&raw[16..24]);
        let addr = u64::from_be_bytes(a);
        if raw[2] != 0 || raw[3] != 0 {
            return Err("reserved header bytes set");
        }
        let data_op = matches!(op, OP_SEND | OP_WRITE | OP_WRITE_IMM);
        if flags & !FLAG_SOLICITED != 0 || (!data_op && flags != 0) {
            return Err("unknown frame flags");
        }
        let solicited = flags & FLAG_SOLICITED != 0;
        let no_payload = |frame: Self| {
            if len == 0 {
                Ok(frame)
            } else {
                Err("unexpected payload")
            }
        };
        match op {
            OP_HELLO | OP_ACCEPT => {
                if addr != MAGIC {
                    return Err("bad handshake magic");
                }
                if imm != VERSION {
                    return Err("unsupported protocol version");
                }
                no_payload(if op == OP_HELLO {
                    Self::Hello
                } else {
                    Self::Accept
                })
            }
            OP_CATALOG_REQUEST | OP_CATALOG => {
                if addr != MAGIC {
                    return Err("bad handshake magic");
                }
                if imm != VERSION {
                    return Err("unsupported protocol version");
                }
                match op {
                    OP_CATALOG_REQUEST => no_payload(Self::CatalogRequest),
                    _ if len as usize <= MAX_CATALOG => Ok(Self::Catalog { len }),
                    _ => Err("catalog too long"),
                }
            }
            OP_REJECT if len as usize <= MAX_REASON => Ok(Self::Reject { len }),
            OP_REJECT => Err("reject reason too long"),
            OP_SEND => Ok(Self::Send { len, solicited }),
            OP_WRITE => Ok(Self::Write {
                len,
                remote: RemoteAddr { addr, rkey },
            }),
            OP_WRITE_IMM => Ok(Self::WriteImm {
                len,
                remote: RemoteAddr { addr, rkey },
                imm,
                solicited,
            }),
            OP_ACK => no_payload(Self::Ack { msn: addr }),
            OP_NAK => {
                let status = status_of(imm).ok_or("unknown NAK syndrome")?;
                no_payload(Self::Nak { msn: addr, status })
            }
            OP_DREQ => no_payload(Self::Dreq),
            OP_NOP => no_payload(Self::Nop),
            _ => Err("unknown opcode"),
        }
    }
}

fn flag(solicited: bool) -> u8 {
    if solicited { FLAG_SOLICITED } else { 0 }
}

/// NAK syndrome of a remote error status.
fn syndrome(status: WcStatus) -> u32 {
    match status {
        WcStatus::RemoteAccess => 1,
        WcStatus::RemoteInvalidRequest => 2,
        WcStatus::RnrRetryExceeded => 3,
        _ => 4,
    }
}

/// Status of a NAK syndrome.
fn status_of(syndrome: u32) -> Option<WcStatus> {
    Some(match syndrome {
        1 => WcStatus::RemoteAccess,
        2 => WcStatus::RemoteInvalidRequest,
        3 => WcStatus::RnrRetryExceeded,
        4 => WcStatus::General,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let remote = RemoteAddr {
            addr: 0x1122_3344_5566_7788,
            rkey: 0xdead_beef,
        };
        let frames = [
            Frame::Hello,
            Frame::Accept,
            Frame::CatalogRequest,
            Frame::Catalog { len: 4096 },
            Frame::Reject { len: 12 },
            Frame::Send {
                len: 5,
                solicited: true,
            },
            Frame::Write {
                len: 1 << 31,
                remote,
            },
            Frame::WriteImm {
                len: 0,
                remote,
                imm: 0x81,
                solicited: false,
            },
            Frame::Ack { msn: u64::MAX },
            Frame::Nak {
                msn: 3,
                status: WcStatus::RnrRetryExceeded,
            },
            Frame::Dreq,
            Frame::Nop,
        ];
        for f in frames {
            assert_eq!(Frame::decode(&f.encode()), Ok(f));
        }
        let imm = Frame::WriteImm {
            len: 0,
            remote,
            imm: 0x0000_0081,
            solicited: true,
        }
        .encode();
        assert_eq!(imm[12..16], [0, 0, 0, 0x81], "immediate travels big-endian");
    }

    #[test]
    fn rejects_malformed_headers() {
        let mut h = Frame::Ack { msn: 1 }.encode();
        h[0] = 0;
        assert!(Frame::decode(&h).is_err());
        h[0] = 200;
        assert!(Frame::decode(&h).is_err());
        let mut h = Frame::Ack { msn: 1 }.encode();
        h[5] = 1; // payload on a control frame
        assert!(Frame::decode(&h).is_err());
        let mut h = Frame::Dreq.encode();
        h[1] = FLAG_SOLICITED;
        assert!(Frame::decode(&h).is_err());
        let mut h = Frame::Send {
            len: 1,
            solicited: false,
        }
        .encode();
        h[1] = 0x80;
        assert!(Frame::decode(&h).is_err());
        let mut h = Frame::Send {
            len: 1,
            solicited: false,
        }
        .encode();
        h[2] = 1;
        assert!(Frame::decode(&h).is_err());
        assert!(Frame::decode(&Frame::Reject { len: 10_000 }.encode()).is_err());
        assert!(Frame::decode(&Frame::Catalog { len: 1 << 20 }.encode()).is_err());
        let mut h = Frame::CatalogRequest.encode();
        h[5] = 1; // payload on a catalog request
        assert!(Frame::decode(&h).is_err());
        let mut h = Frame::Hello.encode();
        h[23] ^= 1;
        assert!(Frame::decode(&h).is_err());
        let mut h = Frame::Nak {
            msn: 1,
            status: WcStatus::RemoteAccess,
        }
        .encode();
        h[15] = 99;
        assert!(Frame::decode(&h).is_err());
    }
}

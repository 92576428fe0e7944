//! MRSP, the Memory Region Setup Protocol (spec §2): one SEND each way per connection.
//!
//! | type | name | direction | layout |
//! |---|---|---|---|
//! | 0x00 | Error | NAA → client | `00 code pad pad` |
//! | 0x01 | Advertisement + Request | client → NAA | header + 24-byte records |
//! | 0x02 | Advertisement | NAA → client | header + 16-byte records |
//!
//! All multi-byte fields are big-endian; records are packed from offset 4 without padding.

use heapless::Vec;
use zerocopy::byteorder::network_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::RegionFlags;
use super::{Error, Result};

/// Most records an MRSP message carries: the FPGA's limit of 32 regions per connection.
pub const MAX_RECORDS: usize = 32;

/// Largest requested NAA address plus one: the field is 56 bits wide (spec §2.3).
pub const ADDR_LIMIT: u64 = 1 << 56;

/// Length of the longest MRSP message: an Advertisement+Request with [`MAX_RECORDS`]
/// records (4 + 32 · 24 = 772 bytes), so also the receive buffer that holds every message.
pub const MAX_MESSAGE_LEN: usize = HEADER_LEN + MAX_RECORDS * REQUEST_RECORD_LEN;

/// Length of the common header (type, count, two padding bytes).
pub const HEADER_LEN: usize = 4;
/// Length of one Advertisement+Request record.
pub const REQUEST_RECORD_LEN: usize = 24;
/// Length of one Advertisement record.
pub const ADVERT_RECORD_LEN: usize = 16;
/// Length of an Error message.
pub const ERROR_LEN: usize = 4;

/// The MRSP message types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum MsgType {
    /// 0x00: the NAA refuses the request.
    Error = 0x00,
    /// 0x01: the client advertises its regions and requests NAA regions.
    AdvertiseRequest = 0x01,
    /// 0x02: the NAA advertises its regions.
    Advertise = 0x02,
}

impl MsgType {
    /// Decodes a type byte; 0x03 and unknown values are errors.
    pub const fn from_byte(byte: u8) -> Result<Self> {
        match byte {
            0x00 => Ok(Self::Error),
            0x01 => Ok(Self::AdvertiseRequest),
            0x02 => Ok(Self::Advertise),
            0x03 => Err(Error::ReservedType),
            other => Err(Error::UnknownType(other)),
        }
    }

    /// The message's name, for logs.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Error => "Error",
            Self::AdvertiseRequest => "Advertisement+Request",
            Self::Advertise => "Advertisement",
        }
    }
}

/// MRSP error codes (type 0x00, byte 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum MrspErrorCode {
    /// 0x01: not enough memory (address + size beyond the memory boundary).
    NotEnoughMemory = 0x01,
    /// 0x02: invalid address (out of bounds).
    InvalidAddress = 0x02,
    /// 0x03: too many regions requested.
    TooManyRegions = 0x03,
}

impl MrspErrorCode {
    /// Decodes an error-code byte.
    pub const fn from_byte(byte: u8) -> Result<Self> {
        match byte {
            0x01 => Ok(Self::NotEnoughMemory),
            0x02 => Ok(Self::InvalidAddress),
            0x03 => Ok(Self::TooManyRegions),
            other => Err(Error::InvalidErrorCode(other)),
        }
    }
}

impl core::fmt::Display for MrspErrorCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::NotEnoughMemory => "not enough memory (0x01)",
            Self::InvalidAddress => "invalid address (0x02)",
            Self::TooManyRegions => "too many regions (0x03)",
        })
    }
}

/// Wire layout of the common header.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct Header {
    msg_type: u8,
    count: u8,
    padding: [u8; 2],
}

/// Wire layout of an Advertisement+Request record (spec §2.3).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct RawRequestRecord {
    /// `flags << 56 | requested_addr & 0x00FF_FFFF_FFFF_FFFF`.
    flags_addr: U64,
    published_addr: U64,
    published_rkey: U32,
    published_size: U32,
}

/// Wire layout of an Advertisement record (spec §2.6).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
struct RawAdvertRecord {
    addr: U64,
    rkey: U32,
    size: U32,
}

/// One record of an Advertisement+Request: a client region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestRecord {
    /// Region flags (validated: see [`RegionFlags::from_wire`]).
    pub flags: RegionFlags,
    /// Requested NAA address (56 bits).
    pub requested_addr: u64,
    /// The client's virtual address of the region (0 for internal regions).
    pub addr: u64,
    /// The client's rkey for the region (0 for internal regions).
    pub rkey: u32,
    /// Region size in bytes.
    pub size: u32,
}

/// One record of an Advertisement: an NAA region the client writes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AdvertRecord {
    /// Remote address for RDMA WRITEs.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Region size in bytes.
    pub size: u32,
}

#[cfg(feature = "defmt")]
impl defmt::Format for RequestRecord {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "RequestRecord {{ flags: {=u8:#x}, requested: {=u64:#x}, addr: {=u64:#x}, rkey: {=u32:#x}, size: {=u32} }}",
            self.flags.bits(),
            self.requested_addr,
            self.addr,
            self.rkey,
            self.size
        )
    }
}

impl RequestRecord {
    fn from_raw(index: u8, raw: &RawRequestRecord) -> Result<Self> {
        let word = raw.flags_addr.get();
        let flag_byte = (word >> 56) as u8;
        let flags = RegionFlags::from_wire(flag_byte).ok_or(Error::InvalidFlags {
            index,
            flags: flag_byte,
        })?;
        let rec = Self {
            flags,
            requested_addr: word & (ADDR_LIMIT - 1),
            addr: raw.published_addr.get(),
            rkey: raw.published_rkey.get(),
            size: raw.published_size.get(),
        };
        if flags.contains(RegionFlags::INTERNAL) && (rec.addr != 0 || rec.rkey != 0) {
            return Err(Error::InvalidInternalRecord { index });
        }
        Ok(rec)
    }

    fn to_raw(self) -> Result<RawRequestRecord> {
        if self.requested_addr >= ADDR_LIMIT {
            return Err(Error::AddressTooLarge);
        }
        Ok(RawRequestRecord {
            flags_addr: U64::new((u64::from(self.flags.bits()) << 56) | self.requested_addr),
            published_addr: U64::new(self.addr),
            published_rkey: U32::new(self.rkey),
            published_size: U32::new(self.size),
        })
    }
}

impl AdvertRecord {
    fn from_raw(raw: &RawAdvertRecord) -> Self {
        Self {
            addr: raw.addr.get(),
            rkey: raw.rkey.get(),
            size: raw.size.get(),
        }
    }

    fn to_raw(self) -> RawAdvertRecord {
        RawAdvertRecord {
            addr: U64::new(self.addr),
            rkey: U32::new(self.rkey),
            size: U32::new(self.size),
        }
    }
}

/// A checked, zero-copy view of an MRSP message in a byte buffer.
///
/// [`Packet::new_checked`] validates the type, the record count and the length; the flag bytes
/// are only validated by [`Repr::parse`] (or per record by [`Packet::request_record`]).
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer after checking that it holds a complete message of a valid type, with a
    /// valid error code or at most [`MAX_RECORDS`] records. Trailing bytes are allowed
    /// (peers may pad); [`Packet::total_len`] tells the message's own length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let bytes = buffer.as_ref();
        let (header, _) = Header::ref_from_prefix(bytes).map_err(|_| Error::Truncated {
            needed: HEADER_LEN,
            len: bytes.len(),
        })?;
        let ty = MsgType::from_byte(header.msg_type)?;
        if ty == MsgType::Error {
            MrspErrorCode::from_byte(header.count)?;
        } else if usize::from(header.count) > MAX_RECORDS {
            return Err(Error::TooManyRecords(header.count));
        }
        let packet = Self { buffer };
        let needed = packet.total_len();
        let len = packet.buffer.as_ref().len();
        if len < needed {
            return Err(Error::Truncated { needed, len });
        }
        Ok(packet)
    }

    /// The message type.
    pub fn msg_type(&self) -> MsgType {
        // new_checked validated the byte; fall back to Error only to stay panic-free.
        MsgType::from_byte(self.buffer.as_ref()[0]).unwrap_or(MsgType::Error)
    }

    /// Record count (types 0x01 and 0x02); the error code byte for type 0x00.
    pub fn count(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// The error code of a type 0x00 message.
    pub fn error_code(&self) -> Option<MrspErrorCode> {
        match self.msg_type() {
            MsgType::Error => MrspErrorCode::from_byte(self.count()).ok(),
            _ => None,
        }
    }

    /// Length of the message itself (header plus records), without trailing bytes.
    pub fn total_len(&self) -> usize {
        let count = usize::from(self.count());
        match self.msg_type() {
            MsgType::Error => ERROR_LEN,
            MsgType::AdvertiseRequest => HEADER_LEN + REQUEST_RECORD_LEN * count,
            MsgType::Advertise => HEADER_LEN + ADVERT_RECORD_LEN * count,
        }
    }

    /// Record `index` of an Advertisement+Request, validated.
    pub fn request_record(&self, index: u8) -> Option<Result<RequestRecord>> {
        if self.msg_type() != MsgType::AdvertiseRequest || index >= self.count() {
            return None;
        }
        let start = HEADER_LEN + REQUEST_RECORD_LEN * usize::from(index);
        let bytes = self
            .buffer
            .as_ref()
            .get(start..start + REQUEST_RECORD_LEN)?;
        let raw = RawRequestRecord::ref_from_bytes(bytes).ok()?;
        Some(RequestRecord::from_raw(index, raw))
    }

    /// Record `index` of an Advertisement.
    pub fn advert_record(&self, index: u8) -> Option<AdvertRecord> {
        if self.msg_type() != MsgType::Advertise || index >= self.count() {
            return None;
        }
        let start = HEADER_LEN + ADVERT_RECORD_LEN * usize::from(index);
        let bytes = self.buffer.as_ref().get(start..start + ADVERT_RECORD_LEN)?;
        RawAdvertRecord::ref_from_bytes(bytes)
            .ok()
            .map(AdvertRecord::from_raw)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

/// An MRSP message, parsed and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(
    clippy::large_enum_variant,
    reason = "no allocation: the records live inline; hot paths use Packet or the emit_* helpers"
)]
pub enum Repr {
    /// Type 0x00.
    Error(MrspErrorCode),
    /// Type 0x01: parameter records first, internal records last (spec §2.3).
    AdvertiseRequest(Vec<RequestRecord, MAX_RECORDS>),
    /// Type 0x02: one record per non-internal request record, in order.
    Advertise(Vec<AdvertRecord, MAX_RECORDS>),
}

#[cfg(feature = "defmt")]
impl defmt::Format for Repr {
    fn format(&self, f: defmt::Formatter<'_>) {
        match self {
            Self::Error(code) => defmt::write!(f, "Error({})", code),
            Self::AdvertiseRequest(r) => defmt::write!(f, "AdvertiseRequest({=[?]})", r.as_slice()),
            Self::Advertise(r) => defmt::write!(f, "Advertise({=[?]})", r.as_slice()),
        }
    }
}

impl Repr {
    /// Parses and validates a message (see the module's panic contract).
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let packet = Packet::new_checked(bytes)?;
        match packet.msg_type() {
            MsgType::Error => Ok(Self::Error(MrspErrorCode::from_byte(packet.count())?)),
            MsgType::AdvertiseRequest => {
                let mut records = Vec::new();
                for index in 0..packet.count() {
                    let rec = packet.request_record(index).ok_or(Error::Truncated {
                        needed: packet.total_len(),
                        len: bytes.len(),
                    })??;
                    records
                        .push(rec)
                        .map_err(|_| Error::TooManyRecords(packet.count()))?;
                }
                Ok(Self::AdvertiseRequest(records))
            }
            MsgType::Advertise => {
                let mut records = Vec::new();
                for index in 0..packet.count() {
                    let rec = packet.advert_record(index).ok_or(Error::Truncated {
                        needed: packet.total_len(),
                        len: bytes.len(),
                    })?;
                    records
                        .push(rec)
                        .map_err(|_| Error::TooManyRecords(packet.count()))?;
                }
                Ok(Self::Advertise(records))
            }
        }
    }

    /// The message type.
    pub fn msg_type(&self) -> MsgType {
        match self {
            Self::Error(_) => MsgType::Error,
            Self::AdvertiseRequest(_) => MsgType::AdvertiseRequest,
            Self::Advertise(_) => MsgType::Advertise,
        }
    }

    /// Bytes [`Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Self::Error(_) => ERROR_LEN,
            Self::AdvertiseRequest(r) => HEADER_LEN + REQUEST_RECORD_LEN * r.len(),
            Self::Advertise(r) => HEADER_LEN + ADVERT_RECORD_LEN * r.len(),
        }
    }

    /// Writes the message to the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        match self {
            Self::Error(code) => emit_error(buf, *code),
            Self::AdvertiseRequest(r) => emit_advertise_request(buf, r.iter().copied()),
            Self::Advertise(r) => emit_advertise(buf, r.iter().copied()),
        }
    }
}

/// Writes an Error message (padding zeroed, spec §2.7); returns its length.
pub fn emit_error(buf: &mut [u8], code: MrspErrorCode) -> Result<usize> {
    let header = Header {
        msg_type: MsgType::Error as u8,
        count: code as u8,
        padding: [0; 2],
    };
    header.write_to_prefix(buf).map_err(|_| Error::Truncated {
        needed: ERROR_LEN,
        len: buf.len(),
    })?;
    Ok(ERROR_LEN)
}

/// Writes an Advertisement+Request from a sequence of records; returns its length.
///
/// Used by the client machine to emit straight from its region table without building a
/// [`Repr`]. Fails if there are more than [`MAX_RECORDS`] records.
pub fn emit_advertise_request(
    buf: &mut [u8],
    records: impl ExactSizeIterator<Item = RequestRecord>,
) -> Result<usize> {
    let raws = records.map(RequestRecord::to_raw);
    emit_records(buf, MsgType::AdvertiseRequest, REQUEST_RECORD_LEN, raws)
}

/// Writes an Advertisement from a sequence of records; returns its length.
pub fn emit_advertise(
    buf: &mut [u8],
    records: impl ExactSizeIterator<Item = AdvertRecord>,
) -> Result<usize> {
    let raws = records.map(|rec| Ok(rec.to_raw()));
    emit_records(buf, MsgType::Advertise, ADVERT_RECORD_LEN, raws)
}

/// Writes a header of type `ty` and then each record of `raws` (`record_len` bytes each);
/// returns the message length. Fails on the first record that failed to convert.
fn emit_records<R: IntoBytes + Immutable>(
    buf: &mut [u8],
    ty: MsgType,
    record_len: usize,
    raws: impl ExactSizeIterator<Item = Result<R>>,
) -> Result<usize> {
    let len = emit_header(buf, ty, raws.len(), record_len)?;
    for (i, raw) in raws.enumerate() {
        let start = HEADER_LEN + record_len * i;
        raw?.write_to_prefix(&mut buf[start..])
            .map_err(|_| Error::Truncated {
                needed: len,
                len: buf.len(),
            })?;
    }
    Ok(len)
}

/// Checks capacity, writes the header and returns the total message length.
fn emit_header(buf: &mut [u8], ty: MsgType, count: usize, record_len: usize) -> Result<usize> {
    let count_byte = u8::try_from(count)
        .ok()
        .filter(|&c| usize::from(c) <= MAX_RECORDS)
        .ok_or(Error::TooManyRecords(
            u8::try_from(count).unwrap_or(u8::MAX),
        ))?;
    let len = HEADER_LEN + record_len * count;
    if buf.len() < len {
        return Err(Error::Truncated {
            needed: len,
            len: buf.len(),
        });
    }
    let header = Header {
        msg_type: ty as u8,
        count: count_byte,
        padding: [0; 2],
    };
    header.write_to_prefix(buf).map_err(|_| Error::Truncated {
        needed: len,
        len: buf.len(),
    })?;
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Advertisement with one record (addr 0x0102030405060708, rkey 0x0A0B0C0D, 256 bytes).
    static ADVERT: [u8; 20] = [
        0x02, 0x01, 0x00, 0x00, // type, count, padding
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // addr
        0x0A, 0x0B, 0x0C, 0x0D, // rkey
        0x00, 0x00, 0x01, 0x00, // size
    ];

    /// An Advertisement+Request with one OUTPUT record (flags 0x08, requested 0x1000).
    static REQUEST: [u8; 28] = [
        0x01, 0x01, 0x00, 0x00, // type, count, padding
        0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, // flags << 56 | requested address
        0x00, 0x00, 0x7F, 0x00, 0x00, 0x01, 0x00, 0x00, // published address
        0x00, 0x00, 0x12, 0x34, // rkey
        0x00, 0x00, 0x02, 0x00, // size
    ];

    static ERROR: [u8; 4] = [0x00, 0x02, 0x00, 0x00];

    fn advert_record() -> AdvertRecord {
        AdvertRecord {
            addr: 0x0102_0304_0506_0708,
            rkey: 0x0A0B_0C0D,
            size: 256,
        }
    }

    fn request_record() -> RequestRecord {
        RequestRecord {
            flags: RegionFlags::OUTPUT,
            requested_addr: 0x1000,
            addr: 0x7F00_0001_0000,
            rkey: 0x1234,
            size: 512,
        }
    }

    #[test]
    fn test_deconstruct() -> Result<()> {
        let packet = Packet::new_checked(&ADVERT[..])?;
        assert_eq!(packet.msg_type(), MsgType::Advertise);
        assert_eq!(packet.count(), 1);
        assert_eq!(packet.total_len(), ADVERT.len());
        assert_eq!(packet.advert_record(0), Some(advert_record()));
        assert_eq!(packet.advert_record(1), None);
        let packet = Packet::new_checked(&REQUEST[..])?;
        assert_eq!(packet.request_record(0), Some(Ok(request_record())));
        let packet = Packet::new_checked(&ERROR[..])?;
        assert_eq!(packet.error_code(), Some(MrspErrorCode::InvalidAddress));
        Ok(())
    }

    #[test]
    fn test_construct() -> Result<()> {
        let mut bytes = [0xA5u8; 28];
        assert_eq!(
            emit_advertise(&mut bytes, [advert_record()].into_iter())?,
            20
        );
        assert_eq!(bytes[..20], ADVERT[..]);
        assert_eq!(
            emit_advertise_request(&mut bytes, [request_record()].into_iter())?,
            28
        );
        assert_eq!(bytes, REQUEST);
        assert_eq!(emit_error(&mut bytes, MrspErrorCode::InvalidAddress)?, 4);
        assert_eq!(bytes[..4], ERROR[..]);
        Ok(())
    }

    #[test]
    fn test_parse() -> Result<()> {
        let Repr::AdvertiseRequest(records) = Repr::parse(&REQUEST)? else {
            return Err(Error::UnknownType(0xFF));
        };
        assert_eq!(records.as_slice(), &[request_record()]);
        assert_eq!(
            Repr::parse(&ERROR)?,
            Repr::Error(MrspErrorCode::InvalidAddress)
        );
        assert_eq!(
            Repr::parse(&ADVERT[..19]),
            Err(Error::Truncated {
                needed: 20,
                len: 19
            })
        );
        Ok(())
    }

    #[test]
    fn test_emit() -> Result<()> {
        let mut records = Vec::new();
        records
            .push(advert_record())
            .map_err(|_| Error::TooManyRecords(2))?;
        let repr = Repr::Advertise(records);
        assert_eq!(repr.buffer_len(), ADVERT.len());
        let mut bytes = [0u8; 20];
        assert_eq!(repr.emit(&mut bytes)?, 20);
        assert_eq!(bytes, ADVERT);
        assert_eq!(
            repr.emit(&mut bytes[..19]),
            Err(Error::Truncated {
                needed: 20,
                len: 19
            })
        );
        Ok(())
    }

    #[test]
    fn test_names() {
        assert_eq!(MsgType::Error.name(), "Error");
        assert_eq!(MsgType::AdvertiseRequest.name(), "Advertisement+Request");
        assert_eq!(MsgType::Advertise.name(), "Advertisement");
    }
}

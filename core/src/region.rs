//! Fixed-capacity region tables for both roles (spec §2.3–§2.6, §3.3).
//!
//! * [`ClientRegions`]: the client's parameter regions (its registered buffers, with flags,
//!   single-send bookkeeping and "bytes to send") and its internal regions (NAA-only scratch
//!   memory), and the requested-address layout of spec §2.5.
//! * [`ServerRegions`]: what an NAA learned from an Advertisement+Request, plus the memory the
//!   NAA assigned to each region.

use heapless::Vec;

use crate::config::{MAX_REGIONS, NAA_ADDR_LIMIT, NAA_PAGE};
use crate::wire::mrsp::{AdvertRecord, RequestRecord};

/// Region flags (a wire type: byte 0 of each record), re-exported where regions are.
pub use crate::wire::RegionFlags;

/// Handle of a region: its index in the record list (on the client, parameter regions only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RegionId(pub(crate) u8);

impl RegionId {
    /// The index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// A handle for index `index` (tables check it when used).
    pub const fn new(index: u8) -> Self {
        Self(index)
    }
}

/// Handle of a client internal region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct InternalId(u8);

impl InternalId {
    /// The index among the internal regions.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// Errors of region-table operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RegionError {
    /// The table holds [`MAX_REGIONS`] regions already.
    Full,
    /// No region with this index.
    UnknownRegion(u8),
    /// Region sizes are sent as u32: at most 4 GiB − 1.
    SizeTooLarge(u64),
    /// "Bytes to send" larger than the region.
    BytesToSendTooLarge {
        /// Region index.
        region: u8,
        /// Requested length.
        len: u32,
        /// Region size.
        size: u32,
    },
    /// The requested-address layout leaves the 56-bit NAA address space.
    AddressOverflow,
}

impl core::fmt::Display for RegionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::Full => write!(f, "region table full ({MAX_REGIONS} regions)"),
            Self::UnknownRegion(i) => write!(f, "no region {i}"),
            Self::SizeTooLarge(s) => write!(f, "region size {s} exceeds 4 GiB - 1"),
            Self::BytesToSendTooLarge { region, len, size } => {
                write!(
                    f,
                    "region {region}: {len} bytes to send exceed its size {size}"
                )
            }
            Self::AddressOverflow => f.write_str("requested NAA addresses exceed 56 bits"),
        }
    }
}

impl core::error::Error for RegionError {}

/// A client parameter region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ParamRegion {
    /// Client virtual address (as registered).
    pub addr: u64,
    /// Client rkey.
    pub rkey: u32,
    /// Registered size.
    pub size: u32,
    /// Flags announced in the MRSP.
    pub flags: RegionFlags,
    /// Bytes written per RPC (`None` = the full size; spec §3.4).
    pub bytes_to_send: Option<u32>,
    /// Single-send input already sent: no longer written (spec §3.3).
    pub single_send_done: bool,
}

impl ParamRegion {
    /// Bytes an RPC writes from this region.
    pub fn send_len(&self) -> u32 {
        self.bytes_to_send.unwrap_or(self.size)
    }

    /// True if the next RPC writes this region.
    pub fn is_sent(&self) -> bool {
        self.flags.contains(RegionFlags::INPUT) && !self.single_send_done
    }
}

/// The client's regions.
#[derive(Clone, Debug, Default)]
pub struct ClientRegions {
    params: Vec<ParamRegion, MAX_REGIONS>,
    internal: Vec<u32, MAX_REGIONS>,
    addr_offset: u64,
}

fn checked_size(size: u64) -> Result<u32, RegionError> {
    u32::try_from(size).map_err(|_| RegionError::SizeTooLarge(size))
}

impl ClientRegions {
    /// An empty table.
    pub const fn new() -> Self {
        Self {
            params: Vec::new(),
            internal: Vec::new(),
            addr_offset: 0,
        }
    }

    fn total(&self) -> usize {
        self.params.len() + self.internal.len()
    }

    /// Adds a parameter region (a registered client buffer) with no flags.
    pub fn add_param(&mut self, addr: u64, rkey: u32, size: u64) -> Result<RegionId, RegionError> {
        let size = checked_size(size)?;
        if self.total() >= MAX_REGIONS {
            return Err(RegionError::Full);
        }
        let id = RegionId(self.params.len() as u8);
        let region = ParamRegion {
            addr,
            rkey,
            size,
            flags: RegionFlags::empty(),
            bytes_to_send: None,
            single_send_done: false,
        };
        self.params.push(region).map_err(|_| RegionError::Full)?;
        Ok(id)
    }

    /// Adds an internal region of `size` bytes (NAA-only memory).
    pub fn add_internal(&mut self, size: u64) -> Result<InternalId, RegionError> {
        let size = checked_size(size)?;
        if self.total() >= MAX_REGIONS {
            return Err(RegionError::Full);
        }
        let id = InternalId(self.internal.len() as u8);
        self.internal.push(size).map_err(|_| RegionError::Full)?;
        Ok(id)
    }

    fn param_mut(&mut self, id: RegionId) -> Result<&mut ParamRegion, RegionError> {
        self.params
            .get_mut(id.index())
            .ok_or(RegionError::UnknownRegion(id.0))
    }

    /// The parameter region `id`.
    pub fn param(&self, id: RegionId) -> Option<&ParamRegion> {
        self.params.get(id.index())
    }

    /// All parameter regions in index order.
    pub fn params(&self) -> &[ParamRegion] {
        &self.params
    }

    /// Sizes of the internal regions in order.
    pub fn internal(&self) -> &[u32] {
        &self.internal
    }

    /// Number of MRSP records (parameters + internal).
    pub fn record_count(&self) -> usize {
        self.total()
    }

    /// Marks a region as input.
    pub fn set_input(&mut self, id: RegionId) -> Result<(), RegionError> {
        self.param_mut(id)?.flags |= RegionFlags::INPUT;
        Ok(())
    }

    /// Marks a region as output.
    pub fn set_output(&mut self, id: RegionId) -> Result<(), RegionError> {
        self.param_mut(id)?.flags |= RegionFlags::OUTPUT;
        Ok(())
    }

    /// Marks a region as single-send input (implies INPUT, spec §2.4).
    pub fn set_single_send(&mut self, id: RegionId) -> Result<(), RegionError> {
        self.param_mut(id)?.flags |= RegionFlags::SINGLESEND | RegionFlags::INPUT;
        Ok(())
    }

    /// Updates the registration (address and rkey) of a region.
    pub fn set_registration(
        &mut self,
        id: RegionId,
        addr: u64,
        rkey: u32,
    ) -> Result<(), RegionError> {
        let region = self.param_mut(id)?;
        region.addr = addr;
        region.rkey = rkey;
        Ok(())
    }

    /// Sets the bytes written per RPC (`None` = full size; `Some(0)` = zero-length write).
    pub fn set_bytes_to_send(&mut self, id: RegionId, len: Option<u32>) -> Result<(), RegionError> {
        let region = self.param_mut(id)?;
        if let Some(len) = len
            && len > region.size
        {
            return Err(RegionError::BytesToSendTooLarge {
                region: id.0,
                len,
                size: region.size,
            });
        }
        region.bytes_to_send = len;
        Ok(())
    }

    /// Sets the first requested NAA address of the layout (the AP1 `addr_offset`; default 0).
    pub fn set_addr_offset(&mut self, offset: u64) {
        self.addr_offset = offset;
    }

    /// Requested NAA addresses in message order (parameters, then internal regions), laid out
    /// as the C client does: internal regions first, each region on a new 4 KiB page (§2.5).
    pub fn requested_addrs(&self) -> Result<Vec<u64, MAX_REGIONS>, RegionError> {
        let mut next = self.addr_offset;
        let mut place = |size: u32| -> Result<u64, RegionError> {
            let addr = next;
            let pages = u64::from(size).div_ceil(NAA_PAGE);
            next = pages
                .checked_mul(NAA_PAGE)
                .and_then(|len| addr.checked_add(len))
                .ok_or(RegionError::AddressOverflow)?;
            if addr >= NAA_ADDR_LIMIT {
                return Err(RegionError::AddressOverflow);
            }
            Ok(addr)
        };
        let mut internal = Vec::<u64, MAX_REGIONS>::new();
        for &size in &self.internal {
            internal.push(place(size)?).map_err(|_| RegionError::Full)?;
        }
        let mut out = Vec::new();
        for p in &self.params {
            out.push(place(p.size)?).map_err(|_| RegionError::Full)?;
        }
        for addr in internal {
            out.push(addr).map_err(|_| RegionError::Full)?;
        }
        Ok(out)
    }

    /// The Advertisement+Request records in message order (spec §2.3).
    pub fn records(
        &self,
    ) -> Result<impl ExactSizeIterator<Item = RequestRecord> + '_, RegionError> {
        let addrs = self.requested_addrs()?;
        let params = self
            .params
            .iter()
            .map(|p| (p.flags, p.addr, p.rkey, p.size));
        let internal = self
            .internal
            .iter()
            .map(|&size| (RegionFlags::INTERNAL, 0, 0, size));
        let all = params.chain(internal).zip(addrs);
        Ok(ExactIter {
            len: self.total(),
            inner: all.map(
                |((flags, addr, rkey, size), requested_addr)| RequestRecord {
                    flags,
                    requested_addr,
                    addr,
                    rkey,
                    size,
                },
            ),
        })
    }

    /// Disables single-send inputs after the first RPC (spec §3.3).
    pub(crate) fn retire_single_send(&mut self) {
        for p in &mut self.params {
            if p.flags.contains(RegionFlags::SINGLESEND) {
                p.single_send_done = true;
            }
        }
    }
}

/// An iterator with a known length (`Chain` is not `ExactSizeIterator`).
struct ExactIter<I> {
    len: usize,
    inner: I,
}

impl<I: Iterator> Iterator for ExactIter<I> {
    type Item = I::Item;
    fn next(&mut self) -> Option<I::Item> {
        let item = self.inner.next()?;
        self.len = self.len.saturating_sub(1);
        Some(item)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len, Some(self.len))
    }
}

impl<I: Iterator> ExactSizeIterator for ExactIter<I> {}

/// The client's side of a region, as the NAA learned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PeerRegion {
    /// Client virtual address.
    pub addr: u64,
    /// Client rkey.
    pub rkey: u32,
}

/// Memory the NAA assigned to a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LocalRegion {
    /// Address the client writes to (the NAA's virtual or bus address).
    pub addr: u64,
    /// rkey the client uses (unused for internal regions).
    pub rkey: u32,
}

/// A region served by the NAA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServedRegion {
    /// Flags from the request.
    pub flags: RegionFlags,
    /// Requested NAA address.
    pub requested_addr: u64,
    /// Size in bytes.
    pub size: u32,
    /// The client's buffer (`None` for internal regions).
    pub peer: Option<PeerRegion>,
    /// The NAA's memory, once assigned.
    pub local: Option<LocalRegion>,
}

impl ServedRegion {
    /// True for NAA-only scratch memory.
    pub fn is_internal(&self) -> bool {
        self.flags.contains(RegionFlags::INTERNAL)
    }

    /// True if the NAA writes this region back each RPC.
    pub fn is_output(&self) -> bool {
        self.flags.contains(RegionFlags::OUTPUT)
    }
}

/// The regions of one NAA connection, in request order (parameters, then internal).
#[derive(Clone, Debug, Default)]
pub struct ServerRegions {
    regions: Vec<ServedRegion, MAX_REGIONS>,
}

impl ServerRegions {
    /// An empty table.
    pub const fn new() -> Self {
        Self {
            regions: Vec::new(),
        }
    }

    /// Builds the table from validated request records.
    pub fn from_records(records: &[RequestRecord]) -> Result<Self, RegionError> {
        let mut regions = Vec::new();
        for r in records {
            let internal = r.flags.contains(RegionFlags::INTERNAL);
            let served = ServedRegion {
                flags: r.flags,
                requested_addr: r.requested_addr,
                size: r.size,
                peer: (!internal).then_some(PeerRegion {
                    addr: r.addr,
                    rkey: r.rkey,
                }),
                local: None,
            };
            regions.push(served).map_err(|_| RegionError::Full)?;
        }
        Ok(Self { regions })
    }

    /// All regions in request order.
    pub fn regions(&self) -> &[ServedRegion] {
        &self.regions
    }

    /// Region `id`.
    pub fn get(&self, id: RegionId) -> Option<&ServedRegion> {
        self.regions.get(id.index())
    }

    /// Number of regions.
    pub fn len(&self) -> usize {
        self.regions.len()
    }

    /// True if there are no regions.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Total bytes of all regions.
    pub fn total_bytes(&self) -> u64 {
        self.regions.iter().map(|r| u64::from(r.size)).sum()
    }

    /// Records the memory assigned to region `id`.
    pub fn set_local(&mut self, id: RegionId, local: LocalRegion) -> Result<(), RegionError> {
        let region = self
            .regions
            .get_mut(id.index())
            .ok_or(RegionError::UnknownRegion(id.0))?;
        region.local = Some(local);
        Ok(())
    }

    /// True once every region has memory.
    pub fn all_assigned(&self) -> bool {
        self.regions.iter().all(|r| r.local.is_some())
    }

    /// The Advertisement records: one per non-internal region, in order (spec §2.6).
    pub fn advert_records(&self) -> impl ExactSizeIterator<Item = AdvertRecord> + '_ {
        let params = self.regions.iter().filter(|r| !r.is_internal());
        ExactIter {
            len: params.clone().count(),
            inner: params.map(|r| {
                let local = r.local.unwrap_or(LocalRegion { addr: 0, rkey: 0 });
                AdvertRecord {
                    addr: local.addr,
                    rkey: local.rkey,
                    size: r.size,
                }
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_from_wire_accepts_c_combinations_only() {
        for ok in [0x00, 0x01, 0x04, 0x06, 0x08, 0x0C, 0x0E] {
            assert!(RegionFlags::from_wire(ok).is_some(), "{ok:#x}");
        }
        for bad in [0x02, 0x03, 0x05, 0x09, 0x0A, 0x10, 0x80, 0xFF] {
            assert!(RegionFlags::from_wire(bad).is_none(), "{bad:#x}");
        }
    }

    #[test]
    fn layout_matches_spec_examples() {
        // §2.5: sizes 1024, 1024, 512 at offset 0 -> 0x0, 0x1000, 0x2000.
        let mut t = ClientRegions::new();
        for size in [1024, 1024, 512] {
            t.add_param(0, 0, size).unwrap();
        }
        assert_eq!(
            t.requested_addrs().unwrap().as_slice(),
            &[0, 0x1000, 0x2000]
        );
        // §10.2: internal 8192 first, then 64, 1000, 256 from 0x1000_0000.
        let mut t = ClientRegions::new();
        for size in [64, 1000, 256] {
            t.add_param(0, 0, size).unwrap();
        }
        t.add_internal(8192).unwrap();
        t.set_addr_offset(0x1000_0000);
        assert_eq!(
            t.requested_addrs().unwrap().as_slice(),
            &[0x1000_2000, 0x1000_3000, 0x1000_4000, 0x1000_0000]
        );
    }

    #[test]
    fn layout_overflow_is_an_error() {
        let mut t = ClientRegions::new();
        t.add_param(0, 0, 4096).unwrap();
        t.add_param(0, 0, 4096).unwrap();
        t.set_addr_offset(NAA_ADDR_LIMIT - 4096);
        assert_eq!(t.requested_addrs(), Err(RegionError::AddressOverflow));
        t.set_addr_offset(u64::MAX - 10);
        assert_eq!(t.requested_addrs(), Err(RegionError::AddressOverflow));
    }

    #[test]
    fn capacity_sizes_and_bytes_to_send_are_checked() {
        let mut t = ClientRegions::new();
        assert_eq!(
            t.add_param(0, 0, 1 << 32),
            Err(RegionError::SizeTooLarge(1 << 32))
        );
        let id = t.add_param(0, 0, 100).unwrap();
        assert!(matches!(
            t.set_bytes_to_send(id, Some(101)),
            Err(RegionError::BytesToSendTooLarge { .. })
        ));
        t.set_bytes_to_send(id, Some(0)).unwrap();
        assert_eq!(t.param(id).unwrap().send_len(), 0);
        assert_eq!(t.set_input(RegionId(5)), Err(RegionError::UnknownRegion(5)));
        for _ in 1..MAX_REGIONS {
            t.add_internal(1).unwrap();
        }
        assert_eq!(t.add_param(0, 0, 1), Err(RegionError::Full));
        assert_eq!(t.add_internal(1), Err(RegionError::Full));
    }

    #[test]
    fn single_send_implies_input_and_retires() {
        let mut t = ClientRegions::new();
        let id = t.add_param(0, 0, 8).unwrap();
        t.set_single_send(id).unwrap();
        assert_eq!(t.param(id).unwrap().flags.bits(), 0x06);
        assert!(t.param(id).unwrap().is_sent());
        t.retire_single_send();
        assert!(!t.param(id).unwrap().is_sent());
    }
}

//! [`Firmware`]: the control plane's main loop over the hardware seams.
//!
//! Each connection slot holds one naaice-core [`Server`] machine in the FPGA mode
//! ([`naaice_core::Placement::Requested`]). The loop feeds it the engine's events, the kernel
//! completions and its deadlines, and executes its actions on the hardware: receives, SENDs
//! and WRITEs go to the [`RoceEngine`], allocations become region-table entries with fresh
//! rkeys, kernel calls go to the [`KernelUnit`] plus a pulse on the start line.

use core::time::Duration;

use embedded_hal::delay::DelayNs;
use embedded_hal::digital::OutputPin;
use naaice_core::config::MRSP_RECV_LEN;
use naaice_core::machine::{
    Input, KernelCall, Machine, Post, RecvBuffer, ServerAction, WrId, Write,
};
use naaice_core::region::RegionId;
use naaice_core::{Instant, Phase, ReturnCode, Server};
use rand_core::CryptoRng;

use crate::clock::Clock;
use crate::config::FirmwareConfig;
use crate::engine::{
    Access, Completion, CompletionKind, ConnId, EngineEvent, RegionEntry, RoceEngine, WriteRequest,
};
use crate::kernel::{KernelDone, KernelJob, KernelUnit};
use crate::log::{debug, info, warning};
use crate::memory_map::overlaps;
use crate::rkey::RkeyGen;

/// Most engine events handled per [`Firmware::step`] (the rest wait for the next step).
const EVENTS_PER_STEP: usize = 16;

/// One connection: the engine's handle and its protocol machine.
#[derive(Debug)]
struct Slot {
    conn: ConnId,
    server: Server,
}

/// The hardware the firmware drives.
#[derive(Debug)]
pub struct Hardware<E, K, P, C> {
    /// The RoCE engine.
    pub engine: E,
    /// The kernel unit.
    pub kernels: K,
    /// The kernel unit's start line.
    pub start: P,
    /// The microsecond clock.
    pub clock: C,
}

/// The firmware for up to `N` concurrent connections (`N ≤ 32`), each with its own region
/// table.
#[derive(Debug)]
pub struct Firmware<'a, E, K, P, C, R, const N: usize> {
    config: FirmwareConfig,
    hw: Hardware<E, K, P, C>,
    rkeys: RkeyGen<R>,
    done: &'a KernelDone<N>,
    /// The one MRSP message buffer: messages are handled one at a time.
    msg: &'a mut [u8; MRSP_RECV_LEN],
    slots: [Option<Slot>; N],
}

impl<'a, E, K, P, C, R, const N: usize> Firmware<'a, E, K, P, C, R, N>
where
    E: RoceEngine,
    K: KernelUnit,
    P: OutputPin,
    C: Clock,
    R: CryptoRng,
{
    /// The firmware over `hw`, with rkeys from `rng`, kernel completions from `done` (shared
    /// with the interrupt handler) and `msg` as the MRSP message buffer.
    pub fn new(
        config: FirmwareConfig,
        hw: Hardware<E, K, P, C>,
        rng: R,
        done: &'a KernelDone<N>,
        msg: &'a mut [u8; MRSP_RECV_LEN],
    ) -> Self {
        Self {
            config,
            hw,
            rkeys: RkeyGen::new(rng),
            done,
            msg,
            slots: core::array::from_fn(|_| None),
        }
    }

    /// The settings.
    pub fn config(&self) -> &FirmwareConfig {
        &self.config
    }

    /// The hardware (for inspection).
    pub fn hardware(&self) -> &Hardware<E, K, P, C> {
        &self.hw
    }

    /// The hardware, mutably (tests drive simulated hardware through it).
    pub fn hardware_mut(&mut self) -> &mut Hardware<E, K, P, C> {
        &mut self.hw
    }

    /// Open connections.
    pub fn connections(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    /// The protocol machine serving engine connection `conn`, if it is open.
    pub fn server(&self, conn: ConnId) -> Option<&Server> {
        self.slots
            .iter()
            .flatten()
            .find(|s| s.conn == conn)
            .map(|s| &s.server)
    }

    /// Runs forever: [`Firmware::step`], then sleep as long as it allows.
    pub fn run(&mut self, delay: &mut impl DelayNs) -> ! {
        loop {
            self.idle(delay);
        }
    }

    /// One [`Firmware::step`] followed by the sleep it allows (none if it did any work).
    pub fn idle(&mut self, delay: &mut impl DelayNs) {
        let sleep = self.step();
        if !sleep.is_zero() {
            delay.delay_us(u32::try_from(sleep.as_micros()).unwrap_or(u32::MAX));
        }
    }

    /// Handles pending engine events, kernel completions and expired deadlines. Returns how
    /// long the caller may sleep before the next step: zero after any work, otherwise the
    /// poll interval capped by the earliest deadline.
    pub fn step(&mut self) -> Duration {
        let mut busy = false;
        for _ in 0..EVENTS_PER_STEP {
            let Some(event) = self.hw.engine.poll_event() else {
                break;
            };
            busy = true;
            let now = self.hw.clock.now();
            self.on_event(now, event);
        }
        let now = self.hw.clock.now();
        for index in 0..N {
            busy |= self.check_kernel(now, index);
            busy |= self.check_deadline(now, index);
        }
        if busy {
            return Duration::ZERO;
        }
        let now = self.hw.clock.now();
        let deadline = self
            .slots
            .iter()
            .flatten()
            .filter_map(|s| s.server.poll_timeout())
            .min();
        // In 32-bit microseconds: the sleep is at most the poll interval, and a 64-bit
        // division (`Duration::from_micros` of a `u64`) costs 1 KiB of the soft-core's flash.
        let poll = u32::try_from(self.config.poll_interval.as_micros()).unwrap_or(u32::MAX);
        let left = deadline.map_or(u64::MAX, |d| d.as_micros().saturating_sub(now.as_micros()));
        let sleep = u32::try_from(left).unwrap_or(u32::MAX).min(poll);
        Duration::from_micros(u64::from(sleep))
    }

    fn slot_of(&self, conn: ConnId) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.conn == conn))
    }

    fn on_event(&mut self, now: Instant, event: EngineEvent) {
        match event {
            EngineEvent::ConnectRequest(conn) => self.on_connect_request(now, conn),
            EngineEvent::Established(conn) => self.feed(now, conn, Input::Established),
            EngineEvent::Disconnected(conn) => self.feed(now, conn, Input::Disconnected),
            EngineEvent::Completion(conn, c) => self.on_completion(now, conn, c),
        }
    }

    // Kept out of line: the new machine (about 2.9 KiB) is built on the stack, and that frame
    // must not add to the deepest call chain (step → handle_input → MRSP parsing).
    #[inline(never)]
    fn on_connect_request(&mut self, now: Instant, conn: ConnId) {
        let free = self.slots.iter().position(Option::is_none);
        let (Some(index), None) = (free, self.slot_of(conn)) else {
            warning!("conn {=u16}: no free slot, rejected", conn);
            self.hw.engine.reject(conn);
            return;
        };
        info!("conn {=u16}: request, slot {=usize}", conn, index);
        self.slots[index] = Some(Slot {
            conn,
            server: Server::new(self.config.server(), now),
        });
        // The machine's first action posts the MRSP receive; only then accept (spec §1.3).
        self.drain(now, index);
        if self.slots[index].is_some() {
            self.hw.engine.accept(conn);
        }
    }

    fn on_completion(&mut self, now: Instant, conn: ConnId, c: Completion) {
        let wr_id = WrId::from_raw(c.wr_id);
        match c.kind {
            CompletionKind::Send => self.feed(now, conn, Input::SendCompleted(wr_id)),
            CompletionKind::Write => self.feed(now, conn, Input::WriteCompleted(wr_id)),
            CompletionKind::RecvImm { imm, len } => {
                self.feed(now, conn, Input::WriteImmReceived { wr_id, imm, len });
            }
            CompletionKind::Failed(error) => {
                self.feed(now, conn, Input::WorkFailed { wr_id, error });
            }
            CompletionKind::Recv { len } => {
                let Some(index) = self.slot_of(conn) else {
                    return;
                };
                let n = self.hw.engine.read_message(conn, &mut self.msg[..]);
                let n = n.min(self.msg.len()).min(len as usize);
                if let Some(slot) = self.slots[index].as_mut() {
                    let data = &self.msg[..n];
                    slot.server
                        .handle_input(now, Input::Received { wr_id, data });
                }
                self.drain(now, index);
            }
        }
    }

    /// Feeds `input` to the machine of `conn` and executes its actions.
    fn feed(&mut self, now: Instant, conn: ConnId, input: Input<'_>) {
        let Some(index) = self.slot_of(conn) else {
            debug!("conn {=u16}: event for no open connection", conn);
            return;
        };
        if let Some(slot) = self.slots[index].as_mut() {
            slot.server.handle_input(now, input);
        }
        self.drain(now, index);
    }

    /// Hands a kernel completion recorded by the interrupt handler to its machine.
    fn check_kernel(&mut self, now: Instant, index: usize) -> bool {
        let Some(slot) = self.slots[index].as_mut() else {
            return false;
        };
        if !slot.server.kernel_running() {
            return false;
        }
        let Some(status) = self.done.take(index as u8) else {
            return false;
        };
        let rc = ReturnCode::new(status).unwrap_or(ReturnCode::KERNEL_FAILED);
        debug!("slot {=usize}: kernel done {=u32:#x}", index, rc.get());
        // Only fails if no kernel was running, which was just checked.
        let _ = slot.server.kernel_finished(now, rc);
        self.drain(now, index);
        true
    }

    /// Handles an expired deadline of slot `index`. A kernel past its deadline is stopped:
    /// the machine answers the RPC with KERNEL_TIMEOUT.
    fn check_deadline(&mut self, now: Instant, index: usize) -> bool {
        let Some(slot) = self.slots[index].as_mut() else {
            return false;
        };
        if slot.server.poll_timeout().is_none_or(|d| now < d) {
            return false;
        }
        let calculating = slot.server.phase() == Phase::Calculating;
        slot.server.handle_timeout(now);
        if calculating && slot.server.kernel_running() {
            warning!("slot {=usize}: kernel timeout", index);
            self.hw.kernels.abort(index as u8);
            let _ = self.done.take(index as u8);
            // The RPC is already answered; this only frees the machine for the next one.
            let _ = slot.server.kernel_finished(now, ReturnCode::KERNEL_TIMEOUT);
        }
        self.drain(now, index);
        true
    }

    /// Executes the actions of slot `index` until its machine has none left.
    fn drain(&mut self, now: Instant, index: usize) {
        loop {
            let Some(slot) = self.slots[index].as_mut() else {
                return;
            };
            let conn = slot.conn;
            let Some(action) = slot.server.poll_action(&mut self.msg[..]) else {
                return;
            };
            match action {
                ServerAction::Post(Post::Recv { wr_id, buffer }) => {
                    let message = buffer == RecvBuffer::Message;
                    if self
                        .hw
                        .engine
                        .post_recv(conn, wr_id.raw(), message)
                        .is_err()
                    {
                        slot.server.handle_input(now, Input::PostFailed(wr_id));
                    }
                }
                ServerAction::Post(Post::Send { wr_id, len }) => {
                    let message = &self.msg[..len.min(MRSP_RECV_LEN)];
                    if self
                        .hw
                        .engine
                        .post_send(conn, wr_id.raw(), message)
                        .is_err()
                    {
                        slot.server.handle_input(now, Input::PostFailed(wr_id));
                    }
                }
                ServerAction::Post(Post::Write(w)) => self.post_write(now, index, &w),
                ServerAction::Allocate(a) => {
                    self.allocate(now, index, a.region, a.size, a.requested_addr, a.internal);
                }
                ServerAction::RunKernel(call) => self.start_kernel(now, index, &call),
                ServerAction::MrspComplete => {
                    info!("conn {=u16}: MRSP done", conn);
                }
                // The error is not formatted: `defmt`'s formatting of the error tree costs
                // 1.2 KiB of flash; the peer learns the cause from the protocol.
                ServerAction::Failed(_) => {
                    warning!("conn {=u16}: protocol failure", conn);
                }
                ServerAction::Disconnect => self.release(index),
            }
        }
    }

    fn post_write(&mut self, now: Instant, index: usize, w: &Write) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        let local = slot.server.regions().get(w.region).and_then(|r| r.local);
        let request = WriteRequest {
            wr_id: w.wr_id.raw(),
            local_addr: local.map_or(0, |l| l.addr),
            len: w.len,
            remote_addr: w.remote_addr,
            rkey: w.rkey,
            imm: w.imm,
            solicited: w.solicited,
        };
        if (local.is_none() && w.len > 0) || self.hw.engine.post_write(slot.conn, &request).is_err()
        {
            slot.server.handle_input(now, Input::PostFailed(w.wr_id));
        }
    }

    /// Places region `region` at its requested address: the machine has checked it against
    /// the memory map; here it is checked against the memory of every other connection
    /// (taken: 0x01, not enough memory), given an rkey and programmed into the region table.
    fn allocate(
        &mut self,
        now: Instant,
        index: usize,
        region: RegionId,
        size: u32,
        addr: u64,
        internal: bool,
    ) {
        let in_use = |a: u64, len: u32| {
            self.slots
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != index)
                .filter_map(|(_, s)| s.as_ref())
                .flat_map(|s| s.server.regions().regions())
                .filter_map(|r| r.local.map(|l| (l.addr, r.size)))
                .any(|(b, b_len)| overlaps(a, len, b, b_len))
        };
        let fits = self.config.memory.contains(addr, size) && !in_use(addr, size);
        let key_taken = |k: u32| {
            self.slots
                .iter()
                .flatten()
                .flat_map(|s| s.server.regions().regions())
                .any(|r| !r.is_internal() && r.local.is_some_and(|l| l.rkey == k))
        };
        let rkey = if !fits {
            None
        } else if internal {
            Some(0)
        } else {
            self.rkeys.next_key(key_taken)
        };
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        let Some(rkey) = rkey else {
            warning!(
                "conn {=u16}: region {=usize} at {=u64:#x} refused",
                slot.conn,
                region.index(),
                addr
            );
            let _ = slot.server.assignment_failed(now, region);
            return;
        };
        if !internal {
            let output = slot
                .server
                .regions()
                .get(region)
                .is_some_and(|r| r.is_output());
            let access = if output {
                Access::REMOTE_WRITE.union(Access::LOCAL_READ)
            } else {
                Access::REMOTE_WRITE
            };
            let entry = RegionEntry {
                addr,
                size,
                rkey,
                access,
            };
            self.hw
                .engine
                .program_region(slot.conn, region.index() as u8, &entry);
        }
        if slot
            .server
            .region_assigned(now, region, addr, rkey)
            .is_err()
        {
            warning!(
                "conn {=u16}: region {=usize} not assignable",
                slot.conn,
                region.index()
            );
        }
    }

    fn start_kernel(&mut self, now: Instant, index: usize, call: &KernelCall) {
        let Some(slot) = self.slots[index].as_mut() else {
            return;
        };
        let job = KernelJob {
            fncode: call.fncode,
            user: call.user,
            rpc: call.rpc,
            regions: slot.server.regions().regions(),
        };
        // A stale completion must not end this kernel.
        let _ = self.done.take(index as u8);
        self.hw.kernels.load(index as u8, &job);
        let pulsed = self.hw.start.set_high().is_ok() && self.hw.start.set_low().is_ok();
        if !pulsed {
            warning!("slot {=usize}: kernel start line failed", index);
            self.hw.kernels.abort(index as u8);
            let _ = slot.server.kernel_finished(now, ReturnCode::KERNEL_FAILED);
        }
    }

    /// Disconnects slot `index`, invalidates its region table and frees it.
    fn release(&mut self, index: usize) {
        let Some(slot) = self.slots[index].take() else {
            return;
        };
        if slot.server.kernel_running() {
            self.hw.kernels.abort(index as u8);
            let _ = self.done.take(index as u8);
        }
        self.hw.engine.clear_regions(slot.conn);
        self.hw.engine.disconnect(slot.conn);
        info!("conn {=u16}: closed, slot {=usize} free", slot.conn, index);
    }
}

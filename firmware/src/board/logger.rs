//! The `defmt` global logger: frames go out over the UART (the soft-core has no debug
//! probe), one log frame at a time inside a critical section.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

use super::map;
use super::mmio::Reg;

/// UART transmit data (write a byte) and status (bit 0: FIFO full).
const UART_TX: Reg = Reg::at(map::UART, 0x00);
const UART_STATUS: Reg = Reg::at(map::UART, 0x04);

fn uart_write(bytes: &[u8]) {
    for &b in bytes {
        while UART_STATUS.read() & 1 != 0 {}
        UART_TX.write(u32::from(b));
    }
}

/// The encoder and the interrupt state to restore, owned by whoever holds the logger.
struct State {
    encoder: UnsafeCell<defmt::Encoder>,
    restore: UnsafeCell<critical_section::RestoreState>,
}

#[allow(unsafe_code)]
// SAFETY: the cells are only touched between `acquire` and `release`, i.e. inside one
// critical section on a single hart, so there is never concurrent access.
unsafe impl Sync for State {}

static STATE: State = State {
    encoder: UnsafeCell::new(defmt::Encoder::new()),
    restore: UnsafeCell::new(critical_section::RestoreState::invalid()),
};
static TAKEN: AtomicBool = AtomicBool::new(false);

#[defmt::global_logger]
struct UartLogger;

#[allow(unsafe_code)]
// SAFETY: `acquire`/`release` bracket every frame with a critical section and the `TAKEN`
// flag, so frames never interleave; `write` and `flush` are only called in between, as the
// `defmt::Logger` contract requires.
unsafe impl defmt::Logger for UartLogger {
    fn acquire() {
        // SAFETY: released in `release` (or below on re-entry), with the state it returned.
        let restore = unsafe { critical_section::acquire() };
        // Interrupts are off inside a frame, so only a bug logs from within one.
        assert!(
            !TAKEN.load(Ordering::Relaxed),
            "defmt logger taken reentrantly"
        );
        TAKEN.store(true, Ordering::Relaxed);
        // SAFETY: inside the critical section and holding `TAKEN`: exclusive access.
        unsafe {
            *STATE.restore.get() = restore;
            (*STATE.encoder.get()).start_frame(uart_write);
        }
    }

    unsafe fn flush() {}

    unsafe fn release() {
        // SAFETY: called after a successful `acquire`, so this context owns the state.
        unsafe {
            (*STATE.encoder.get()).end_frame(uart_write);
            TAKEN.store(false, Ordering::Relaxed);
            critical_section::release(*STATE.restore.get());
        }
    }

    unsafe fn write(bytes: &[u8]) {
        // SAFETY: called between `acquire` and `release`: exclusive access.
        unsafe { (*STATE.encoder.get()).write(bytes, uart_write) };
    }
}

defmt::timestamp!("{=u64:us}", super::micros());

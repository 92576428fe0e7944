//! The firmware image for the NAA soft-core (`riscv32imc-unknown-none-elf`, feature `board`):
//!
//! ```text
//! cargo build -p naaice-firmware --bin naaice-firmware-image --features board \
//!     --target riscv32imc-unknown-none-elf --release
//! ```
//!
//! On any other target it is an empty program.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(all(target_os = "none", target_arch = "riscv32"))]
mod image {
    use core::time::Duration;

    use chacha20::ChaCha8Rng;
    use naaice_core::config::MRSP_RECV_LEN;
    use naaice_core::{FunctionCode, KernelSet};
    use naaice_firmware::board::{self, Board, CONNECTIONS, KERNEL_DONE};
    use naaice_firmware::{Firmware, FirmwareConfig, Hardware, MemoryMap};
    use static_cell::StaticCell;

    /// The accelerator's DDR as seen by the RoCE engine and the kernels.
    const MEMORY: MemoryMap = MemoryMap {
        base: 0,
        len: 256 << 20,
    };

    /// The kernels of this bitstream.
    const KERNELS: KernelSet = {
        let mut set = KernelSet::empty();
        let mut code = 1;
        while code <= 3 {
            if let Some(c) = FunctionCode::new(code) {
                set = set.with(c);
            }
            code += 1;
        }
        set
    };

    type Fw = Firmware<
        'static,
        board::MmioEngine,
        board::MmioKernel,
        board::StartLine,
        board::TimerClock,
        ChaCha8Rng,
        CONNECTIONS,
    >;

    static MESSAGE: StaticCell<[u8; MRSP_RECV_LEN]> = StaticCell::new();
    static FIRMWARE: StaticCell<Fw> = StaticCell::new();

    #[riscv_rt::entry]
    fn main() -> ! {
        let (fw, mut sleep) = setup();
        Board::enable_interrupts(&mut Board::init());
        fw.run(&mut sleep)
    }

    /// Builds the firmware into its static cell. Out of line, so that the temporaries of the
    /// construction are off the stack before the main loop starts.
    #[inline(never)]
    fn setup() -> (&'static mut Fw, board::Sleep) {
        let mut b = Board::init();
        let rng = b.rng();
        let mut config = FirmwareConfig::new(MEMORY, KERNELS);
        config.kernel_timeout = Duration::from_secs(5);
        config.idle_timeout = Some(Duration::from_secs(3600));
        defmt::info!("naaice firmware: {=usize} connections", CONNECTIONS);
        let msg = MESSAGE.init([0; MRSP_RECV_LEN]);
        let hw = Hardware {
            engine: b.engine,
            kernels: b.kernels,
            start: b.start,
            clock: b.clock,
        };
        let fw = FIRMWARE.init_with(|| Firmware::new(config, hw, rng, &KERNEL_DONE, msg));
        (fw, b.sleep)
    }

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
        loop {
            core::hint::spin_loop();
        }
    }
}

#[cfg(not(target_os = "none"))]
fn main() {}

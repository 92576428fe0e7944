//! The firmware image: built for the soft-core target with the `firmware` profile (the
//! image CI measures), then loaded from its ELF file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use object::elf::PT_LOAD;
use object::read::elf::{ElfFile32, ProgramHeader};
use object::{LittleEndian, Object, ObjectSymbol};

/// The soft-core's Rust target.
pub const TARGET: &str = "riscv32imc-unknown-none-elf";

/// The loaded image: flash contents and the symbols the simulation needs.
#[derive(Clone, Debug)]
pub struct Image {
    /// Flash contents from address 0 (every loadable segment at its load address).
    pub flash: Vec<u8>,
    /// Reset address.
    pub entry: u32,
    /// Top of the stack (initial stack pointer).
    pub stack_top: u32,
    /// Lowest address the stack may grow to (end of the statics).
    pub stack_limit: u32,
    /// Static RAM (`.data` + `.bss`) in bytes.
    pub statics: u32,
    /// The ELF file (its `defmt` table decodes the UART stream).
    pub elf: Vec<u8>,
}

/// Builds the image once per test process (cargo's own locking makes concurrent builds
/// wait for each other) and returns its path.
pub fn build() -> Result<&'static Path, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(build_image)
        .as_deref()
        .map_err(Clone::clone)
}

fn build_image() -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("the tests crate has no parent directory")?;
    ensure_target(root)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(root)
        .args([
            "build",
            "-p",
            "naaice-firmware",
            "--bin",
            "naaice-firmware-image",
        ])
        .args([
            "--features",
            "board",
            "--target",
            TARGET,
            "--profile",
            "firmware",
        ])
        .output()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building the firmware image failed (is the target installed? \
             `rustup target add {TARGET}`):\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    // Cargo resolves a relative CARGO_TARGET_DIR against its working directory, `root`
    // (joining an absolute one replaces `root`).
    let target_dir =
        root.join(std::env::var_os("CARGO_TARGET_DIR").unwrap_or_else(|| "target".into()));
    Ok(target_dir
        .join(TARGET)
        .join("firmware")
        .join("naaice-firmware-image"))
}

/// Installs the soft-core target with rustup when the toolchain lacks it, so that the README's
/// `cargo test --workspace` works on a fresh machine without a separate setup step.
fn ensure_target(root: &Path) -> Result<(), String> {
    let sysroot = Command::new("rustc")
        .current_dir(root)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("running rustc: {e}"))?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_owned();
    if Path::new(&sysroot)
        .join("lib/rustlib")
        .join(TARGET)
        .is_dir()
    {
        return Ok(());
    }
    eprintln!("firmware image: installing the {TARGET} target with rustup");
    let status = Command::new("rustup")
        .current_dir(root)
        .args(["target", "add", TARGET])
        .status()
        .map_err(|e| format!("the {TARGET} target is missing and rustup cannot run: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`rustup target add {TARGET}` failed ({status})"))
    }
}

/// Decodes the `defmt` frames of `stream` (the UART bytes) with the image's table: one line
/// per frame, `LEVEL message`.
pub fn decode_log(elf: &[u8], stream: &[u8]) -> Result<Vec<String>, String> {
    let table = defmt_decoder::Table::parse(elf)
        .map_err(|e| format!("defmt table: {e}"))?
        .ok_or("the image has no defmt table")?;
    let mut decoder = table.new_stream_decoder();
    decoder.received(stream);
    let mut lines = Vec::new();
    loop {
        match decoder.decode() {
            Ok(frame) => lines.push(format!(
                "{} {}",
                frame.level().map_or("-", |l| l.as_str()),
                frame.display_message()
            )),
            Err(defmt_decoder::DecodeError::UnexpectedEof) => return Ok(lines),
            Err(defmt_decoder::DecodeError::Malformed) => {
                return Err(format!("malformed defmt frame after {lines:?}"));
            }
        }
    }
}

/// Loads the image at `path` for a flash of `flash_len` bytes at address 0.
pub fn load(path: &Path, flash_len: usize) -> Result<Image, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let elf = ElfFile32::<LittleEndian>::parse(&*data).map_err(|e| format!("ELF: {e}"))?;
    let e = elf.endian();
    let mut flash = vec![0; flash_len];
    for ph in elf.elf_program_headers() {
        if ph.p_type(e) != PT_LOAD || ph.p_filesz(e) == 0 {
            continue;
        }
        let bytes = ph.data(e, &*data).map_err(|_| "segment outside the file")?;
        let at = ph.p_paddr(e) as usize;
        flash
            .get_mut(at..at + bytes.len())
            .ok_or_else(|| format!("segment at {at:#x} outside the flash"))?
            .copy_from_slice(bytes);
    }
    let symbol = |name: &str| {
        elf.symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| s.address() as u32)
            .ok_or_else(|| format!("symbol {name} missing"))
    };
    let statics_start = symbol("__sdata")?;
    let stack_limit = symbol("__ebss")?;
    let image = Image {
        flash,
        entry: elf.entry() as u32,
        stack_top: symbol("_stack_start")?,
        stack_limit,
        statics: stack_limit - statics_start,
        elf: Vec::new(),
    };
    Ok(Image { elf: data, ..image })
}

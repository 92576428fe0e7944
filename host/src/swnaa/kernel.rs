//! Kernels of the software NAA: what runs for a function code.

use std::sync::Arc;
use std::time::{Duration, Instant};

use naaice_core::machine::KernelCall;
use naaice_core::{FunctionCode, RegionFlags, ReturnCode};

use crate::memory::BufferGuard;

/// Return code the software NAA sends when a kernel panics: core's
/// [`ReturnCode::KERNEL_FAILED`], shared with the firmware.
pub const KERNEL_FAILED: ReturnCode = ReturnCode::KERNEL_FAILED;

/// One region as a kernel sees it.
#[derive(Debug)]
pub struct KernelRegion<'a> {
    /// Flags the client announced (INTERNAL, SINGLESEND, INPUT, OUTPUT).
    pub flags: RegionFlags,
    /// The NAA-side memory, exclusively borrowed for the kernel's run.
    pub data: BufferGuard<'a>,
}

impl KernelRegion<'_> {
    /// True for NAA-only scratch memory.
    pub fn is_internal(&self) -> bool {
        self.flags.contains(RegionFlags::INTERNAL)
    }
}

/// What a kernel gets: the call (function code, user bytes, RPC number) and the regions.
#[derive(Debug)]
pub struct KernelContext<'r, 'a> {
    call: KernelCall,
    regions: &'r mut [KernelRegion<'a>],
    deadline: Instant,
}

impl<'r, 'a> KernelContext<'r, 'a> {
    pub(crate) fn new(
        call: KernelCall,
        regions: &'r mut [KernelRegion<'a>],
        deadline: Instant,
    ) -> Self {
        Self {
            call,
            regions,
            deadline,
        }
    }

    /// When the kernel timeout passes. A kernel still running then has its RPC answered with
    /// KERNEL_TIMEOUT when it returns (its outputs are not sent), so long kernels should
    /// check [`KernelContext::timed_out`] and stop early.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// True once the kernel timeout has passed: whatever the kernel returns now, the RPC is
    /// answered with KERNEL_TIMEOUT.
    pub fn timed_out(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Function code of the RPC.
    pub fn fncode(&self) -> u8 {
        self.call.fncode
    }

    /// The three user bytes of the client's immediate.
    pub fn user_bytes(&self) -> [u8; 3] {
        self.call.user
    }

    /// 1-based RPC number on this connection.
    pub fn rpc(&self) -> u32 {
        self.call.rpc
    }

    /// All regions in request order (parameters, then internal).
    pub fn regions(&mut self) -> &mut [KernelRegion<'a>] {
        self.regions
    }

    /// Parameter region `index` (the client's parameter order).
    pub fn param(&mut self, index: usize) -> Option<&mut [u8]> {
        self.regions
            .iter_mut()
            .filter(|r| !r.is_internal())
            .nth(index)
            .map(|r| &mut *r.data)
    }

    /// Internal region `index`.
    pub fn internal(&mut self, index: usize) -> Option<&mut [u8]> {
        self.regions
            .iter_mut()
            .filter(|r| r.is_internal())
            .nth(index)
            .map(|r| &mut *r.data)
    }

    /// Number of parameter regions.
    pub fn param_count(&self) -> usize {
        self.regions.iter().filter(|r| !r.is_internal()).count()
    }
}

/// A kernel: computes on the regions and returns the RPC's return code.
///
/// Closures `Fn(&mut KernelContext) -> ReturnCode` are kernels.
pub trait Kernel: Send + Sync {
    /// Runs the kernel.
    fn run(&self, ctx: &mut KernelContext<'_, '_>) -> ReturnCode;
}

impl<F> Kernel for F
where
    F: Fn(&mut KernelContext<'_, '_>) -> ReturnCode + Send + Sync,
{
    fn run(&self, ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
        self(ctx)
    }
}

/// A kernel with what the NAA says of it: its name (banner, logs, `naaice-info --probe`)
/// and its own timeout.
#[derive(Clone)]
struct Entry {
    kernel: Arc<dyn Kernel>,
    name: Arc<str>,
    timeout: Option<Duration>,
}

/// Kernels by function code, with a name each and optionally their own timeout. Users add
/// their own without touching the library.
#[derive(Clone)]
pub struct KernelRegistry {
    kernels: Vec<Option<Entry>>,
}

impl std::fmt::Debug for KernelRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelRegistry")
            .field("served", &self.served().collect::<Vec<_>>())
            .finish()
    }
}

impl Default for KernelRegistry {
    fn default() -> Self {
        Self::builtin()
    }
}

/// Adds `n` (mod 256) to every byte of every parameter region.
fn add_to_params(ctx: &mut KernelContext<'_, '_>, n: u8) {
    for r in ctx.regions().iter_mut().filter(|r| !r.is_internal()) {
        for b in r.data.iter_mut() {
            *b = b.wrapping_add(n);
        }
    }
}

impl KernelRegistry {
    /// No kernels.
    pub fn empty() -> Self {
        Self {
            kernels: vec![None; 128],
        }
    }

    /// The reference's built-ins (spec §5.3): 1 adds 1 to every byte of every parameter
    /// region, 2 adds 2, 3 does nothing.
    /// Names: `add1`, `add2`, `empty`.
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        const fn code(c: u8) -> FunctionCode {
            match FunctionCode::new(c) {
                Some(code) => code,
                None => panic!("built-in function codes are 1..=127"),
            }
        }
        const ONE: FunctionCode = code(1);
        const TWO: FunctionCode = code(2);
        const THREE: FunctionCode = code(3);
        r.register_named(ONE, "add1", |ctx: &mut KernelContext<'_, '_>| {
            add_to_params(ctx, 1);
            ReturnCode::SUCCESS
        });
        r.register_named(TWO, "add2", |ctx: &mut KernelContext<'_, '_>| {
            add_to_params(ctx, 2);
            ReturnCode::SUCCESS
        });
        r.register_named(THREE, "empty", |_: &mut KernelContext<'_, '_>| {
            ReturnCode::SUCCESS
        });
        r
    }

    /// Registers (or replaces) the kernel for `code`, named `kernel CODE`; returns the
    /// previous one.
    pub fn register(
        &mut self,
        code: FunctionCode,
        kernel: impl Kernel + 'static,
    ) -> Option<Arc<dyn Kernel>> {
        self.register_named(code, &format!("kernel {}", code.get()), kernel)
    }

    /// Registers (or replaces) the kernel for `code` under `name` (shown in the banner, the
    /// logs and `naaice-info --probe`); returns the previous one.
    pub fn register_named(
        &mut self,
        code: FunctionCode,
        name: &str,
        kernel: impl Kernel + 'static,
    ) -> Option<Arc<dyn Kernel>> {
        self.insert(code, name, Arc::new(kernel))
    }

    /// Registers a shared kernel (see [`KernelRegistry::register_named`]).
    pub fn insert(
        &mut self,
        code: FunctionCode,
        name: &str,
        kernel: Arc<dyn Kernel>,
    ) -> Option<Arc<dyn Kernel>> {
        let entry = Entry {
            kernel,
            name: name.into(),
            timeout: None,
        };
        self.kernels[usize::from(code.get())]
            .replace(entry)
            .map(|e| e.kernel)
    }

    /// Gives the kernel for `code` its own timeout instead of the NAA's kernel timeout
    /// (`None`: the NAA's). False when `code` has no kernel.
    pub fn set_timeout(&mut self, code: FunctionCode, timeout: Option<Duration>) -> bool {
        match &mut self.kernels[usize::from(code.get())] {
            Some(e) => {
                e.timeout = timeout;
                true
            }
            None => false,
        }
    }

    /// Removes the kernel for `code`.
    pub fn remove(&mut self, code: FunctionCode) -> Option<Arc<dyn Kernel>> {
        self.kernels[usize::from(code.get())]
            .take()
            .map(|e| e.kernel)
    }

    /// The kernel for a 7-bit function code.
    pub fn get(&self, fncode: u8) -> Option<&Arc<dyn Kernel>> {
        self.entry(fncode).map(|e| &e.kernel)
    }

    fn entry(&self, fncode: u8) -> Option<&Entry> {
        self.kernels.get(usize::from(fncode))?.as_ref()
    }

    /// The name of the kernel for `fncode`.
    pub fn name(&self, fncode: u8) -> Option<&str> {
        self.entry(fncode).map(|e| &*e.name)
    }

    /// The kernel's own timeout (`None`: the NAA's, or no such kernel).
    pub fn timeout(&self, fncode: u8) -> Option<Duration> {
        self.entry(fncode).and_then(|e| e.timeout)
    }

    /// The longest timeout of any kernel: `default` (the NAA's) or a kernel's own.
    pub fn longest_timeout(&self, default: Duration) -> Duration {
        self.kernels
            .iter()
            .flatten()
            .filter_map(|e| e.timeout)
            .fold(default, Duration::max)
    }

    /// The function codes served, with their kernels' names, in code order.
    pub fn served(&self) -> impl Iterator<Item = (u8, &str)> {
        self.kernels
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some((u8::try_from(i).ok()?, &*e.as_ref()?.name)))
    }

    /// The codes served with their names, `1 add1, 2 add2, 7 scale` (`none` when empty): the
    /// banner's list.
    pub fn describe(&self) -> String {
        let list: Vec<String> = self
            .served()
            .map(|(code, name)| format!("{code} {name}"))
            .collect();
        if list.is_empty() {
            "none".to_owned()
        } else {
            list.join(", ")
        }
    }

    /// The catalog a software NAA answers `naaice-info --probe` with: one `CODE NAME` line
    /// per kernel, in code order (control characters of names as spaces).
    pub fn catalog(&self) -> String {
        self.served()
            .map(|(code, name)| {
                let name: String = name
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect();
                format!("{code} {name}\n")
            })
            .collect()
    }

    /// The function codes with a kernel, for the protocol machine.
    pub fn codes(&self) -> naaice_core::machine::KernelSet {
        let mut set = naaice_core::machine::KernelSet::empty();
        for (i, k) in self.kernels.iter().enumerate() {
            if let (Some(_), Some(code)) = (k, u8::try_from(i).ok().and_then(FunctionCode::new)) {
                set.insert(code);
            }
        }
        set
    }
}

/// The kernels a catalog ([`KernelRegistry::catalog`]) lists: `(code, name)`, lines that are
/// not `CODE NAME` with a code of 1-127 left out.
pub fn parse_catalog(text: &str) -> Vec<(u8, String)> {
    text.lines()
        .filter_map(|line| {
            let (code, name) = line.split_once(' ')?;
            let code = code.parse::<u8>().ok().filter(|c| (1..=127).contains(c))?;
            Some((code, name.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_lists_codes_and_names_and_reads_back() {
        let mut r = KernelRegistry::builtin();
        let code = FunctionCode::new(7).unwrap();
        r.register_named(code, "scale\nby 2", |_: &mut KernelContext<'_, '_>| {
            ReturnCode::SUCCESS
        });
        let text = r.catalog();
        assert_eq!(text, "1 add1\n2 add2\n3 empty\n7 scale by 2\n");
        let listed = parse_catalog(&(text + "junk\n200 too big\n"));
        assert_eq!(listed.len(), 4);
        assert_eq!(listed[3], (7, "scale by 2".to_owned()));
    }
}

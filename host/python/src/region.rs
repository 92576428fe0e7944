//! A kernel's view of one NAA region: a buffer-protocol object over the region's memory,
//! which `numpy.frombuffer` turns into an array without copying.
//!
//! The view is valid while the kernel runs. It keeps the region's memory allocated
//! ([`Buffer`] clone), refuses new exports once the kernel returned, and counts the exports
//! still alive then: a kernel that kept an array of a region has its RPC answered with
//! KERNEL_FAILED (the array would otherwise see the next RPC's data change under it).

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use naaice::Buffer;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

/// One region of the RPC a kernel runs for (`numpy.frombuffer(region, numpy.uint8)`).
#[pyclass(module = "naaice._native", name = "Region", frozen)]
pub(crate) struct Region {
    /// Start of the memory (the kernel's exclusive borrow of the region).
    ptr: usize,
    len: usize,
    /// Keeps the memory allocated while a view exists.
    _keep: Buffer,
    /// False once the kernel returned: no new exports.
    valid: AtomicBool,
    /// Exports alive.
    exports: AtomicUsize,
    /// The region's flags (`NAA_REGION_*`: 4 input, 8 output).
    #[pyo3(get)]
    flags: u8,
}

impl Region {
    /// A view of `data`, the memory of a region the kernel holds exclusively now.
    pub(crate) fn new(data: &mut naaice::BufferGuard<'_>, flags: u8) -> Self {
        Self {
            ptr: data.as_mut_ptr() as usize,
            len: data.len(),
            _keep: data.buffer().clone(),
            valid: AtomicBool::new(true),
            exports: AtomicUsize::new(0),
            flags,
        }
    }

    /// Ends the view (the kernel returned); the number of exports still alive.
    pub(crate) fn close(&self) -> usize {
        self.valid.store(false, Ordering::Release);
        self.exports.load(Ordering::Acquire)
    }
}

#[pymethods]
impl Region {
    /// Address of the region's first byte (the same as `array.ctypes.data` of its array).
    #[getter]
    fn address(&self) -> usize {
        self.ptr
    }

    fn __len__(&self) -> usize {
        self.len
    }

    /// The buffer protocol: a writable, contiguous byte buffer over the region's memory.
    ///
    /// # Safety
    ///
    /// Called by Python with a `view` to fill.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let this = slf.get();
        if !this.valid.load(Ordering::Acquire) {
            return Err(PyBufferError::new_err(
                "this region belongs to an RPC whose kernel has returned: copy what a kernel \
                 needs later (array.copy()) instead of keeping the array",
            ));
        }
        let len = isize::try_from(this.len)
            .map_err(|_| PyBufferError::new_err("region larger than isize::MAX"))?;
        // SAFETY: `view` is the Py_buffer Python passed us to fill; `ptr`/`len` describe the
        // region's memory, valid and exclusively the kernel's while `valid` is true (the
        // kernel runs on this thread now), and kept allocated by `_keep` afterwards.
        // PyBuffer_FillInfo takes a new reference to `slf` for `view.obj`.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(view, slf.as_ptr(), this.ptr as *mut c_void, len, 0, flags)
        };
        if rc != 0 {
            return Err(PyErr::take(slf.py())
                .unwrap_or_else(|| PyBufferError::new_err("PyBuffer_FillInfo failed")));
        }
        this.exports.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The buffer protocol: an export ended.
    ///
    /// # Safety
    ///
    /// Called by Python for a view [`Region::__getbuffer__`] filled.
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.exports.fetch_sub(1, Ordering::AcqRel);
    }
}

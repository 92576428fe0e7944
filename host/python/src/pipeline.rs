//! `naaice.Pipeline`: a large array offloaded in chunks over several connections
//! (`naaice::Pipeline`), with the interpreter lock released while it runs.

use std::sync::Mutex;

use naaice::Pipeline;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;

use crate::errors;
use crate::params::plain_data;

/// A pipeline: `depth` connections to one NAA, each with an in-place parameter of `chunk`
/// bytes.
#[pyclass(module = "naaice._native", name = "_Pipeline", frozen)]
pub(crate) struct PyPipeline {
    pipeline: Mutex<Option<Pipeline>>,
}

#[pymethods]
impl PyPipeline {
    /// Connects (the NAA at `address`, in local mode, or from `NAA_SPEC`).
    #[new]
    #[pyo3(signature = (fn_code, chunk, depth, address=None, local=false))]
    fn new(
        py: Python<'_>,
        fn_code: u32,
        chunk: usize,
        depth: usize,
        address: Option<&str>,
        local: bool,
    ) -> PyResult<Self> {
        let (options, transport) = crate::handle::connect_options(py, address, local)?;
        let pipeline = py
            .detach(|| Pipeline::create_with(&transport, fn_code, chunk, depth, &options))
            .map_err(errors::to_py)?;
        Ok(Self {
            pipeline: Mutex::new(Some(pipeline)),
        })
    }

    /// Connections (chunks in flight at once); 0 once closed.
    #[getter]
    fn depth(&self) -> usize {
        self.lock().as_ref().map_or(0, Pipeline::depth)
    }

    /// The chunk size in bytes.
    #[getter]
    fn chunk(&self) -> usize {
        self.lock().as_ref().map_or(0, Pipeline::chunk)
    }

    /// Runs the kernel over `data` (a writable, contiguous buffer of plain data) in place:
    /// `(chunks sent, depth, failed chunk or None, its return code)`.
    fn run(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<(usize, usize, Option<usize>, u32)> {
        let export = PyUntypedBuffer::get(data)
            .map_err(|e| errors::buffer(format!("data does not export a buffer: {e}")))?;
        let format = export.format().to_string_lossy();
        if let Err(why) = plain_data(&format) {
            return Err(errors::buffer(format!(
                "data is not plain data: its buffer format {format:?} {why}"
            )));
        }
        if export.readonly() {
            return Err(errors::buffer(
                "data is read-only: the pipeline writes the results in place",
            ));
        }
        if !(export.is_c_contiguous() || export.is_fortran_contiguous()) {
            return Err(errors::buffer(
                "data is not contiguous (a strided view): pass a contiguous array",
            ));
        }
        let (addr, len) = (export.buf_ptr() as usize, export.len_bytes());
        let mut guard = self.lock();
        let Some(pipeline) = guard.as_mut() else {
            return Err(errors::invalid("the pipeline is closed"));
        };
        let ran = py.detach(|| {
            let bytes: &mut [u8] = if len == 0 {
                &mut []
            } else {
                // SAFETY: the export (held until after this call) is writable and contiguous
                // for `len` bytes at `addr`, a non-null buffer pointer; the memory stays in
                // place while exported. Python code of other threads could touch the object
                // meanwhile, as with a handle's parameters (docs/python.md says not to).
                unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) }
            };
            pipeline.run(bytes)
        });
        drop(guard);
        export.release(py);
        let report = ran.map_err(errors::to_py)?;
        let (failed, code) = report
            .failed
            .map_or((None, 0), |(chunk, rc)| (Some(chunk), rc.get()));
        Ok((report.chunks, report.depth, failed, code))
    }

    /// Closes the connections (again: nothing).
    fn close(&self, py: Python<'_>) {
        let taken = self.lock().take();
        if let Some(p) = taken {
            py.detach(move || p.finalize());
        }
    }
}

impl PyPipeline {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Pipeline>> {
        self.pipeline.lock().unwrap_or_else(|e| e.into_inner())
    }
}

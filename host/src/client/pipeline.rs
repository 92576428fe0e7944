//! Large offloads that overlap transfer and compute: a [`Pipeline`] cuts an array into
//! chunks and keeps one chunk in flight on each of several connections to the NAA, so that
//! chunk k+1 moves over the link while the NAA computes chunk k (the streaming model of
//! accelerator offload).
//!
//! It uses nothing beyond the MRSP and plain RPCs, so it works with every NAA the protocol
//! reaches (the software NAA, the FPGA NAA, the C reference). Each connection is a handle
//! with one in-place parameter of the chunk's size; the NAA runs the handle's kernel on each
//! chunk as on any RPC. The kernel must therefore work chunk by chunk (element-wise, or on
//! independent blocks): it gets the chunk's number (0, 1, 2, …; 24 bits, wrapping) in the
//! RPC's user bytes, big-endian, and the last chunk padded with zeros to the chunk size.
//!
//! An NAA that accepts fewer connections than asked (its connection limit) gets fewer lanes
//! (at least one; with one, chunks run one after the other: correct, without overlap).
//!
//! ```no_run
//! use naaice::transport::AnyTransport;
//! use naaice::{NaaOptions, Pipeline};
//!
//! # fn main() -> naaice::Result<()> {
//! let mut data = vec![0u8; 256 << 20];
//! let options = NaaOptions::from_env()?;
//! let mut pipeline = Pipeline::create_with(&AnyTransport::default(), 7, 8 << 20, 2, &options)?;
//! let report = pipeline.run(&mut data)?;
//! assert!(report.failed.is_none());
//! # Ok(()) }
//! ```

use naaice_core::ReturnCode;

use crate::client::naa::{Call, Naa, NaaOptions, Param};
use crate::error::{Error, Result};
use crate::transport::{Endpoint, Transport};

/// Most lanes (connections) of one pipeline.
pub const MAX_DEPTH: usize = 64;

/// One connection of a pipeline and the chunk it carries.
#[derive(Debug)]
struct Lane<E: Endpoint> {
    naa: Naa<E>,
    param: Param,
}

/// An array offloaded in chunks over several connections at once; see the
/// [module](self).
#[derive(Debug)]
pub struct Pipeline<E: Endpoint = crate::transport::AnyEndpoint> {
    lanes: Vec<Lane<E>>,
    chunk: usize,
}

/// What a [`Pipeline::run`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineReport {
    /// Chunks sent (each one RPC).
    pub chunks: usize,
    /// Lanes used (connections with a chunk in flight at once).
    pub depth: usize,
    /// The first chunk whose kernel did not return success, with its return code: the
    /// chunks after it were not sent (those in flight finished), and the data of the
    /// failed chunk and those after it is left as it was.
    pub failed: Option<(usize, ReturnCode)>,
}

impl<E: Endpoint> Pipeline<E> {
    /// Connects up to `depth` lanes (1..=[`MAX_DEPTH`]) for function code `fncode`, each with
    /// one in-place parameter of `chunk` bytes, as [`Naa::create_with`] with `options`
    /// does. A lane after the first that the NAA refuses (its connection limit) is left out:
    /// see [`Pipeline::depth`].
    pub fn create_with<T: Transport<Endpoint = E> + Clone + 'static>(
        transport: &T,
        fncode: u32,
        chunk: usize,
        depth: usize,
        options: &NaaOptions,
    ) -> Result<Self> {
        if chunk == 0 || chunk > naaice_core::config::MAX_REGION_BYTES as usize {
            return Err(Error::InvalidArgument(format!(
                "chunk size {chunk} is not 1 B to 1 GiB"
            )));
        }
        if !(1..=MAX_DEPTH).contains(&depth) {
            return Err(Error::InvalidArgument(format!(
                "depth {depth} is not 1 to {MAX_DEPTH}"
            )));
        }
        let mut lanes: Vec<Lane<E>> = Vec::with_capacity(depth);
        for i in 0..depth {
            let param = Param::zeroed(chunk);
            // Every lane on the NAA the first one reached (an `NAA_SPEC` entry is taken by
            // one handle of a process at a time).
            let made = Naa::create_to(
                transport,
                fncode,
                vec![param.clone()],
                vec![param.clone()],
                options,
                lanes.first().map(|l| l.naa.target()),
            );
            match made {
                Ok(naa) => lanes.push(Lane { naa, param }),
                Err(e) if i == 0 => return Err(e),
                Err(e) => {
                    tracing::info!(
                        lanes = i,
                        asked = depth,
                        error = %e,
                        "pipeline: the NAA accepted fewer connections; going on with fewer lanes"
                    );
                    break;
                }
            }
        }
        Ok(Self { lanes, chunk })
    }

    /// Lanes (connections): chunks in flight at once.
    pub fn depth(&self) -> usize {
        self.lanes.len()
    }

    /// The chunk size in bytes.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Runs the kernel over `data` in place, chunk by chunk, `depth` chunks in flight.
    pub fn run(&mut self, data: &mut [u8]) -> Result<PipelineReport> {
        self.run_over(Data::InPlace(data))
    }

    /// Runs the kernel over `input`, chunk by chunk, into `output` (of the same length).
    pub fn run_from(&mut self, input: &[u8], output: &mut [u8]) -> Result<PipelineReport> {
        if input.len() != output.len() {
            return Err(Error::InvalidArgument(format!(
                "input ({} B) and output ({} B) differ in length",
                input.len(),
                output.len()
            )));
        }
        self.run_over(Data::Apart(input, output))
    }

    fn run_over(&mut self, mut data: Data<'_>) -> Result<PipelineReport> {
        let chunk = self.chunk;
        let len = data.len();
        let chunks = len.div_ceil(chunk);
        let depth = self.lanes.len();
        let range = |k: usize| k * chunk..len.min((k + 1) * chunk);
        let mut failed = None;
        let mut next = 0;
        // Chunk k rides on lane k % depth: the lanes finish in chunk order.
        for lane in self.lanes.iter_mut().take(chunks) {
            copy_in(&lane.param, data.source(range(next)));
            lane.naa.invoke_with(&chunk_call(next))?;
            next += 1;
        }
        for done in 0..chunks {
            if done >= next {
                break;
            }
            let lane = &mut self.lanes[done % depth];
            let status = lane.naa.wait()?;
            if !status.naa_error.is_success() {
                failed.get_or_insert((done, status.naa_error));
            }
            if failed.is_none() {
                copy_out(&lane.param, data.target(range(done)));
                if next < chunks {
                    copy_in(&lane.param, data.source(range(next)));
                    lane.naa.invoke_with(&chunk_call(next))?;
                    next += 1;
                }
            }
        }
        Ok(PipelineReport {
            chunks: next,
            depth,
            failed,
        })
    }

    /// Closes every lane.
    pub fn finalize(self) {
        for lane in self.lanes {
            lane.naa.finalize();
        }
    }
}

/// Where chunks come from and go to.
enum Data<'a> {
    InPlace(&'a mut [u8]),
    Apart(&'a [u8], &'a mut [u8]),
}

impl Data<'_> {
    fn len(&self) -> usize {
        match self {
            Self::InPlace(d) => d.len(),
            Self::Apart(i, _) => i.len(),
        }
    }

    fn source(&self, range: std::ops::Range<usize>) -> &[u8] {
        match self {
            Self::InPlace(d) => &d[range],
            Self::Apart(i, _) => &i[range],
        }
    }

    fn target(&mut self, range: std::ops::Range<usize>) -> &mut [u8] {
        match self {
            Self::InPlace(d) => &mut d[range],
            Self::Apart(_, o) => &mut o[range],
        }
    }
}

/// The call of chunk `k`: its number in the user bytes.
fn chunk_call(k: usize) -> Call {
    let [_, a, b, c] = (k as u32).to_be_bytes();
    Call::new().user_bytes([a, b, c])
}

/// Puts `src` into the lane's parameter, zeros after it.
fn copy_in(param: &Param, src: &[u8]) {
    let mut region = param.buffer().lock();
    region[..src.len()].copy_from_slice(src);
    region[src.len()..].fill(0);
}

/// Takes the lane's parameter into `dst` (its first `dst.len()` bytes).
fn copy_out(param: &Param, dst: &mut [u8]) {
    let region = param.buffer().lock();
    dst.copy_from_slice(&region[..dst.len()]);
}

//! The kinds the command line chooses: what a client does (`--api`, handed to client
//! processes) and how the pipeline benchmark's kernel computes (`--compute`).

use clap::ValueEnum;

/// The API the clients of `--clients` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Api {
    /// `naaice::Naa`: `invoke` + `wait`.
    Rust,
    /// The C ABI of `libnaaice_ap2`: `naa_invoke` + `naa_wait` (NAA from `NAA_SPEC`).
    C,
}

/// What the threads of a client process do (the hidden `--worker` option).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum WorkerKind {
    /// RPCs through `naaice::Naa`, a thread per client.
    Rust,
    /// RPCs through the C ABI, a thread per client.
    C,
    /// Raw TCP round trips against the benchmark's echo peer, a thread per connection.
    Echo,
    /// RPCs through `naaice::Naa`, one thread driving every handle with `wait_any`.
    Overlap,
    /// RPCs through the C ABI, one thread driving every handle with `naa_waitany`.
    COverlap,
}

impl WorkerKind {
    /// The kind for clients of `api`.
    pub(crate) fn of(api: Api) -> Self {
        match api {
            Api::Rust => Self::Rust,
            Api::C => Self::C,
        }
    }

    /// The overlap kind for clients of `api`.
    pub(crate) fn overlap(api: Api) -> Self {
        match api {
            Api::Rust => Self::Overlap,
            Api::C => Self::COverlap,
        }
    }

    /// Whether its clients call the C ABI (and need `NAA_SPEC`).
    pub(crate) fn is_c(self) -> bool {
        matches!(self, Self::C | Self::COverlap)
    }

    /// Whether one thread drives all its clients.
    pub(crate) fn is_overlap(self) -> bool {
        matches!(self, Self::Overlap | Self::COverlap)
    }

    /// The name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::C => "c",
            Self::Echo => "echo",
            Self::Overlap => "overlap",
            Self::COverlap => "c-overlap",
        }
    }
}

/// How the benchmark's kernel spends its compute time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Compute {
    /// Touches every byte, then waits out the rest of its time (an accelerator computing
    /// off the host CPU).
    Paced,
    /// Keeps a core busy for all of its time (a CPU kernel).
    Spin,
}

//! The one place where the core machines' actions are sorted into work for the transport
//! ([`Step::PostRecv`], [`Step::Send`], [`Step::Write`]) and events for the owner of the
//! connection ([`ClientEvent`], [`ServerEvent`]).

use naaice_core::machine::{Action, Error, Input, KernelCall, RecvBuffer, RpcResult, WrId, Write};
use naaice_core::{Client, Instant, RegionId, Server};

/// What the driver does next for a machine.
pub(crate) enum Step<Ev> {
    /// Post a receive.
    PostRecv { wr_id: WrId, buffer: RecvBuffer },
    /// Post a SEND of the first `len` bytes of the scratch buffer.
    Send { wr_id: WrId, len: usize },
    /// Queue an RDMA WRITE (posted with the writes that follow it as one list).
    Write(Write),
    /// Something for the owner of the connection.
    Event(Ev),
}

/// A core protocol machine as the driver uses it (implemented for both roles).
pub(crate) trait Role {
    /// What the machine reports to the owner of the connection.
    type Event;
    /// The next step, if any; SENDs are encoded into `buf`.
    fn next_step(&mut self, buf: &mut [u8]) -> Option<Step<Self::Event>>;
    /// Feeds a completion or connection event.
    fn handle_input(&mut self, now: Instant, input: Input<'_>);
    /// Handles expired deadlines (no-op when none expired).
    fn handle_timeout(&mut self, now: Instant);
    /// The machine's next deadline.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The connection was established (connect or accept returned).
    fn established(&mut self, now: Instant);
}

/// Events of the client machine.
#[derive(Debug)]
pub(crate) enum ClientEvent {
    /// The MRSP finished.
    MrspComplete,
    /// An RPC finished (whatever its return code).
    RpcComplete(RpcResult),
    /// The connection failed.
    Failed(Error),
}

/// Events of the server machine.
#[derive(Debug)]
pub(crate) enum ServerEvent {
    /// Provide memory for a region.
    Allocate {
        region: RegionId,
        size: u32,
        internal: bool,
    },
    /// Run a kernel, then report its return code.
    RunKernel(KernelCall),
    /// The MRSP finished.
    MrspComplete,
    /// The connection failed.
    Failed(Error),
    /// The connection is over (tear it down).
    Disconnect,
}

/// Transport work common to both roles, or `Err(action)` for a role-specific one.
fn transport_step<Ev>(action: Action) -> Result<Step<Ev>, Action> {
    match action {
        Action::PostRecv { wr_id, buffer } => Ok(Step::PostRecv { wr_id, buffer }),
        Action::Send { wr_id, len } => Ok(Step::Send { wr_id, len }),
        Action::Write(w) => Ok(Step::Write(w)),
        other => Err(other),
    }
}

/// The calls a [`Role`] forwards to the machine's own methods of the same names.
macro_rules! forward_to_machine {
    () => {
        fn handle_input(&mut self, now: Instant, input: Input<'_>) {
            Self::handle_input(self, now, input);
        }
        fn handle_timeout(&mut self, now: Instant) {
            Self::handle_timeout(self, now);
        }
        fn poll_timeout(&self) -> Option<Instant> {
            Self::poll_timeout(self)
        }
    };
}

impl Role for Client {
    type Event = ClientEvent;

    fn next_step(&mut self, buf: &mut [u8]) -> Option<Step<ClientEvent>> {
        loop {
            let action = transport_step(self.poll_action(buf)?);
            return Some(match action {
                Ok(step) => step,
                Err(Action::MrspComplete) => Step::Event(ClientEvent::MrspComplete),
                Err(Action::RpcComplete(r)) => Step::Event(ClientEvent::RpcComplete(r)),
                Err(Action::Failed(e)) => Step::Event(ClientEvent::Failed(e)),
                Err(other) => {
                    tracing::error!(?other, "not a client action");
                    continue;
                }
            });
        }
    }
    forward_to_machine!();
    fn established(&mut self, now: Instant) {
        Self::handle_input(self, now, Input::AddressResolved);
        Self::handle_input(self, now, Input::Established);
    }
}

impl Role for Server {
    type Event = ServerEvent;

    fn next_step(&mut self, buf: &mut [u8]) -> Option<Step<ServerEvent>> {
        loop {
            let action = transport_step(self.poll_action(buf)?);
            return Some(match action {
                Ok(step) => step,
                Err(Action::Allocate {
                    region,
                    size,
                    internal,
                    ..
                }) => Step::Event(ServerEvent::Allocate {
                    region,
                    size,
                    internal,
                }),
                Err(Action::RunKernel(k)) => Step::Event(ServerEvent::RunKernel(k)),
                Err(Action::MrspComplete) => Step::Event(ServerEvent::MrspComplete),
                Err(Action::Failed(e)) => Step::Event(ServerEvent::Failed(e)),
                Err(Action::Disconnect) => Step::Event(ServerEvent::Disconnect),
                Err(other) => {
                    tracing::error!(?other, "not a server action");
                    continue;
                }
            });
        }
    }
    forward_to_machine!();
    fn established(&mut self, now: Instant) {
        Self::handle_input(self, now, Input::Established);
    }
}

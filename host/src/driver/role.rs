//! The one place where the core machines' actions are sorted into work requests for the
//! transport ([`Post`]) and events for the owner of the connection ([`ClientEvent`],
//! [`ServerEvent`]).

use naaice_core::machine::{ClientAction, Error, Input, KernelCall, Machine, Post, ServerAction};
use naaice_core::{Client, Instant, RegionId, Server};

/// What the driver does with one action of a machine.
pub(crate) enum Step<Ev> {
    /// Post a work request.
    Post(Post),
    /// Report something to the owner of the connection.
    Event(Ev),
}

/// A core protocol machine as the driver runs it (both roles).
pub(crate) trait Role: Machine {
    /// What the machine reports to the owner of the connection.
    type Event;
    /// Sorts one action.
    fn step(action: Self::Action) -> Step<Self::Event>;
    /// The connection was established (connect or accept returned).
    fn established(&mut self, now: Instant);
}

/// Events of the client machine.
#[derive(Debug)]
pub(crate) enum ClientEvent {
    /// The MRSP finished.
    MrspComplete,
    /// An RPC finished (whatever its return code; the machine keeps the result).
    RpcComplete,
    /// The connection failed (the machine keeps the error).
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

impl Role for Client {
    type Event = ClientEvent;

    fn step(action: ClientAction) -> Step<ClientEvent> {
        Step::Event(match action {
            ClientAction::Post(post) => return Step::Post(post),
            ClientAction::MrspComplete => ClientEvent::MrspComplete,
            ClientAction::RpcComplete(_) => ClientEvent::RpcComplete,
            ClientAction::Failed(e) => ClientEvent::Failed(e),
        })
    }

    fn established(&mut self, now: Instant) {
        self.handle_input(now, Input::AddressResolved);
        self.handle_input(now, Input::Established);
    }
}

impl Role for Server {
    type Event = ServerEvent;

    fn step(action: ServerAction) -> Step<ServerEvent> {
        Step::Event(match action {
            ServerAction::Post(post) => return Step::Post(post),
            ServerAction::Allocate {
                region,
                size,
                internal,
                ..
            } => ServerEvent::Allocate {
                region,
                size,
                internal,
            },
            ServerAction::RunKernel(k) => ServerEvent::RunKernel(k),
            ServerAction::MrspComplete => ServerEvent::MrspComplete,
            ServerAction::Failed(e) => ServerEvent::Failed(e),
            ServerAction::Disconnect => ServerEvent::Disconnect,
        })
    }

    fn established(&mut self, now: Instant) {
        self.handle_input(now, Input::Established);
    }
}

//! The core protocol machines as the driver runs them. Their actions are sorted into work
//! requests and events by the core ([`MachineAction::sort`]), once, for both roles.

use naaice_core::machine::{Input, Machine, MachineAction};
use naaice_core::{Client, Instant, Server};

pub(crate) use naaice_core::machine::{ClientEvent, ServerEvent};

/// A core protocol machine as the driver runs it (both roles).
pub(crate) trait Role: Machine {
    /// The connection was established (connect or accept returned).
    fn established(&mut self, now: Instant);
}

/// What the machine reports to the owner of the connection.
pub(crate) type Event<M> = <<M as Machine>::Action as MachineAction>::Event;

impl Role for Client {
    fn established(&mut self, now: Instant) {
        self.handle_input(now, Input::AddressResolved);
        self.handle_input(now, Input::Established);
    }
}

impl Role for Server {
    fn established(&mut self, now: Instant) {
        self.handle_input(now, Input::Established);
    }
}

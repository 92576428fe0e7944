//! Where a suite runs ([`Site`]): shared by the suites and the rendezvous fleet.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use naaice::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::AnyTransport;
use naaice::transport::local::LocalTransport;
use naaice::transport::soft::SoftTransport;
use naaice::transport::waiting::WaitPolicy;

use naaice::core::ClientConfig;
use naaice::{Connection, Naa, NaaOptions, Param};

use crate::{code, test_kernels};

/// Where a suite runs: a transport, and the local address the software NAA listens on.
#[derive(Clone, Debug)]
pub struct Site {
    /// The transport of the NAA and its clients.
    pub transport: AnyTransport,
    /// The NAA's address (port chosen by the system).
    pub ip: IpAddr,
    /// How the NAA's workers and the clients wait.
    pub wait: WaitPolicy,
    /// The NAA serves through the in-process transport (local mode's; `ip` is unused), its
    /// clients reach it through `transport` (which connects in process to such an NAA).
    pub in_process: bool,
}

impl Site {
    /// The software transport on 127.0.0.1.
    pub fn soft() -> Self {
        Self {
            transport: SoftTransport::default().into(),
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            wait: WaitPolicy::default(),
            in_process: false,
        }
    }

    /// The in-process transport of local mode: the NAA in this process, no sockets.
    pub fn local() -> Self {
        Self {
            in_process: true,
            ..Self::soft()
        }
    }

    /// AP2 options for `naa`, waiting as the site says.
    pub fn options(&self, naa: &SoftNaaHandle) -> NaaOptions {
        NaaOptions {
            wait: self.wait,
            ..NaaOptions::at(naa.local_addr())
        }
    }

    /// A software NAA with the test kernels, running in the background (its workers wait as
    /// the site says).
    pub fn start_naa(&self, config: SoftNaaConfig) -> SoftNaaHandle {
        self.start_naa_with(config, test_kernels())
    }

    /// A software NAA with `kernels`, running in the background (its workers wait as the
    /// site says), on this site's transport or in process.
    pub fn start_naa_with(&self, config: SoftNaaConfig, kernels: KernelRegistry) -> SoftNaaHandle {
        let config = SoftNaaConfig {
            wait: self.wait,
            ..config
        };
        let naa = if self.in_process {
            SoftNaa::bind(LocalTransport, LocalTransport::any(), config, kernels)
                .and_then(SoftNaa::spawn)
        } else {
            let addr = SocketAddr::new(self.ip, 0);
            SoftNaa::bind(self.transport.clone(), addr, config, kernels).and_then(SoftNaa::spawn)
        };
        naa.expect("start the software NAA")
    }

    /// Connects (AP1) to `naa` for `fncode`.
    pub fn try_connect(&self, naa: &SoftNaaHandle, fncode: u8) -> naaice::Result<Connection> {
        let config = ClientConfig::new(code(fncode));
        let mut conn = Connection::connect(&self.transport, naa.local_addr(), None, config)?;
        conn.set_wait(self.wait);
        Ok(conn)
    }

    /// Connects (AP1) to `naa` for `fncode`, or panics.
    pub fn connect(&self, naa: &SoftNaaHandle, fncode: u8) -> Connection {
        self.try_connect(naa, fncode).expect("connect")
    }

    /// An AP2 handle on `naa` for `fncode` with these input and output parameters, or
    /// panics.
    pub fn create(
        &self,
        naa: &SoftNaaHandle,
        fncode: u32,
        inputs: Vec<Param>,
        outputs: Vec<Param>,
    ) -> Naa {
        Naa::create_with(&self.transport, fncode, inputs, outputs, &self.options(naa))
            .expect("create an NAA handle")
    }

    /// An AP2 handle on `naa` for `fncode` with one in-place parameter of `len` bytes.
    pub fn in_place(&self, naa: &SoftNaaHandle, fncode: u32, len: usize) -> Naa {
        let p = Param::from_vec(pattern(len, 9));
        self.create(naa, fncode, vec![p.clone()], vec![p])
    }
}

/// Deterministic test bytes: `len` bytes that differ per `seed`.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

//! The measurements of one size against the NAA under test.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use naaice::transport::{AnyEndpoint, AnyTransport};
use naaice::{Buffer, Connection, Naa, NaaOptions, Param};
use naaice_core::{ClientConfig, FunctionCode};

use crate::Error;
use crate::base::cpu::{CpuStamp, CpuUse};
use crate::base::process_clock::ProcessClock;
use crate::base::raw::{RawPeer, STREAM_CHUNK};
use crate::base::setup::retry;
use crate::base::sizes::{MIB, Size};
use crate::base::stats::Samples;

/// Steady RPCs and raw round trips are measured in blocks of this many, alternately.
const BLOCK: usize = 50;
/// Pause after each block: long enough for the threads of the other block to stop spinning
/// (the adaptive wait policy's cap is 200 µs).
const PAUSE: Duration = Duration::from_millis(2);

/// What is measured against: the NAA, how to reach it, and the raw TCP limit if any.
pub(crate) struct Target<'a> {
    /// The transport of the RPCs.
    pub transport: &'a AnyTransport,
    /// The NAA's address.
    pub naa: SocketAddr,
    /// The kernel called.
    pub fncode: FunctionCode,
    /// The raw TCP peer (software transport on this machine only).
    pub raw: Option<&'a RawPeer>,
    /// Seconds of each stream-bandwidth measurement (four per size from 1 MiB).
    pub stream_secs: f64,
    /// The NAA's process clock (`--naa-pid`): the other side's CPU time is read from it
    /// instead of this process's other threads.
    pub naa_cpu: Option<&'a ProcessClock>,
}

/// Everything measured for one size.
#[derive(Debug)]
pub(crate) struct Measured {
    /// The size.
    pub size: Size,
    /// Steady-state RPCs on one connection.
    pub steady: Samples,
    /// Raw TCP round trips alternated with them.
    pub raw: Samples,
    /// New connections: connecting (address and route resolution, queue pairs on both
    /// sides, the connection handshake), before the setup.
    pub connect: Samples,
    /// New connections: registration of the region.
    pub register: Samples,
    /// New connections: the MRSP.
    pub mrsp: Samples,
    /// New connections: registration + MRSP (the reference's `setup_time`).
    pub setup: Samples,
    /// New connections: the first RPC (the reference's low-level `transfer_time`).
    pub first: Samples,
    /// Middleware: `naa_invoke` + `naa_wait` after `naa_create`.
    pub middleware: Samples,
    /// Best one-direction raw TCP stream bandwidth (bytes/s), from 1 MiB: 1 MiB messages
    /// (cache-resident buffers).
    pub stream_bw: Option<f64>,
    /// The same with messages of this size from and into buffers of this size (as much
    /// memory as the RPC touches).
    pub stream_sized_bw: Option<f64>,
    /// CPU time of the steady-state RPCs (while each ran; the raw round trips between them
    /// are not counted).
    pub cpu: CpuUse,
}

impl Measured {
    /// Nothing measured yet for `size`.
    pub(crate) fn new(size: Size) -> Self {
        Self {
            size,
            steady: Samples::default(),
            raw: Samples::default(),
            connect: Samples::default(),
            register: Samples::default(),
            mrsp: Samples::default(),
            setup: Samples::default(),
            first: Samples::default(),
            middleware: Samples::default(),
            stream_bw: None,
            stream_sized_bw: None,
            cpu: CpuUse::default(),
        }
    }
}

/// A buffer of `size` bytes with every page touched (like a client that fills its input).
fn filled(size: u64) -> Result<Buffer, Error> {
    let len = usize::try_from(size)?;
    Ok(Buffer::from_vec((0..len).map(|i| i as u8).collect()))
}

impl Target<'_> {
    fn connect(&self) -> Result<Connection<AnyEndpoint>, Error> {
        retry("connect", || {
            let mut conn = Connection::connect(
                self.transport,
                self.naa,
                None,
                ClientConfig::new(self.fncode),
            )?;
            conn.set_wait(crate::base::setup::wait());
            Ok(conn)
        })
    }

    /// One in-place region (flags 0x0C); returns (registration, MRSP) in seconds.
    fn setup(conn: &mut Connection<AnyEndpoint>, buffer: &Buffer) -> Result<(f64, f64), Error> {
        let t = Instant::now();
        let id = conn.add_param(buffer)?;
        conn.set_input(id)?;
        conn.set_output(id)?;
        let register = t.elapsed().as_secs_f64();
        let t = Instant::now();
        conn.do_mrsp()?;
        Ok((register, t.elapsed().as_secs_f64()))
    }

    /// One RPC; its duration in seconds.
    fn rpc(conn: &mut Connection<AnyEndpoint>) -> Result<f64, Error> {
        let t = Instant::now();
        let r = conn.do_transfer()?;
        let dt = t.elapsed().as_secs_f64();
        if !r.status.is_success() {
            return Err(format!("the RPC failed with status {}", r.status).into());
        }
        Ok(dt)
    }

    /// Measures one size: `steady` RPCs on one connection (alternated with raw round trips),
    /// then `reps` new connections of the low-level client and `reps` of the middleware one.
    pub(crate) fn measure(
        &self,
        size: Size,
        steady: usize,
        reps: usize,
    ) -> Result<Measured, Error> {
        let buffer = filled(size.bytes)?;
        let mut m = Measured::new(size);
        // The stream limits before and after the steady state; the better of each counts.
        let stream_peer = self.raw.filter(|_| size.bytes >= MIB);
        let sized = usize::try_from(size.bytes)?;
        let mut streams = Vec::new();
        let stream = |streams: &mut Vec<(f64, f64)>| -> Result<(), Error> {
            if let Some(peer) = stream_peer {
                streams.push((
                    peer.stream_bandwidth(self.stream_secs, STREAM_CHUNK)?,
                    peer.stream_bandwidth(self.stream_secs, sized)?,
                ));
            }
            Ok(())
        };
        stream(&mut streams)?;
        self.steady_state(&buffer, steady, &mut m)?;
        stream(&mut streams)?;
        m.stream_bw = streams.iter().map(|s| s.0).reduce(f64::max);
        m.stream_sized_bw = streams.iter().map(|s| s.1).reduce(f64::max);

        for _ in 0..reps {
            let t = Instant::now();
            let mut conn = self.connect()?;
            m.connect.push(t.elapsed().as_secs_f64());
            let (register, mrsp) = Self::setup(&mut conn, &buffer)?;
            m.first.push(Self::rpc(&mut conn)?);
            conn.disconnect();
            m.register.push(register);
            m.mrsp.push(mrsp);
            m.setup.push(register + mrsp);
        }
        for _ in 0..reps {
            m.middleware.push(self.middleware_sample(&buffer)?);
        }
        Ok(m)
    }

    fn steady_state(&self, buffer: &Buffer, n: usize, m: &mut Measured) -> Result<(), Error> {
        let mut conn = self.connect()?;
        Self::setup(&mut conn, buffer)?;
        let mut echo = self.raw.map(|p| p.echo(m.size.bytes)).transpose()?;
        let per_rpc = echo.is_some();
        let mut round_trip = |samples: Option<&mut Samples>| -> Result<(), Error> {
            if let Some(echo) = echo.as_mut() {
                let t = echo.round_trip()?;
                if let Some(s) = samples {
                    s.push(t);
                }
            }
            Ok(())
        };
        for _ in 0..(n / 10).clamp(1, 50) {
            Self::rpc(&mut conn)?;
            round_trip(None)?;
        }
        // Alternate RPCs and raw round trips so that machine noise hits both alike. The CPU clocks
        // are read around each RPC only when raw round trips run between them (reading them
        // costs system calls, which under emulation take as long as a small RPC).
        let naa_cpu = self.naa_cpu;
        let mut rpc = |m: &mut Measured| -> Result<(), Error> {
            let cpu = per_rpc.then(|| CpuStamp::now(naa_cpu));
            m.steady.push(Self::rpc(&mut conn)?);
            if let Some(cpu) = cpu {
                m.cpu.add(cpu, CpuStamp::now(naa_cpu), 1);
            }
            Ok(())
        };
        let whole = (!per_rpc).then(|| CpuStamp::now(naa_cpu));
        // Blocks of RPCs and of raw round trips, alternating which goes first, with a pause
        // between them: a raw round trip right after an RPC would share the CPUs with the
        // client and NAA threads still spinning for the next one.
        let mut left = n;
        let mut raw_first = true;
        while left > 0 {
            let block = left.min(BLOCK);
            for raw_pass in [raw_first, !raw_first] {
                match (raw_pass, per_rpc) {
                    (true, true) => (0..block).try_for_each(|_| round_trip(Some(&mut m.raw)))?,
                    (true, false) => continue,
                    (false, _) => (0..block).try_for_each(|_| rpc(m))?,
                }
                if per_rpc {
                    std::thread::sleep(PAUSE);
                }
            }
            raw_first = !raw_first;
            left -= block;
        }
        if let Some(whole) = whole {
            let rpcs = u32::try_from(n).unwrap_or(u32::MAX);
            m.cpu.add(whole, CpuStamp::now(naa_cpu), rpcs);
        }
        conn.disconnect();
        Ok(())
    }

    /// The middleware client: `naa_create` (one in-place parameter), then the timed
    /// `naa_invoke` + `naa_wait`, then `naa_finalize`.
    fn middleware_sample(&self, buffer: &Buffer) -> Result<f64, Error> {
        let options = NaaOptions {
            wait: crate::base::setup::wait(),
            ..NaaOptions::at(self.naa)
        };
        let fncode = u32::from(self.fncode.get());
        let mut naa = retry("naa_create", || {
            Naa::create_with(
                self.transport,
                fncode,
                vec![Param::new(buffer.clone())],
                vec![Param::new(buffer.clone())],
                &options,
            )
        })?;
        let t = Instant::now();
        naa.invoke()?;
        let status = naa.wait()?;
        let dt = t.elapsed().as_secs_f64();
        naa.finalize();
        if !status.naa_error.is_success() {
            return Err(
                format!("the middleware RPC failed with status {}", status.naa_error).into(),
            );
        }
        Ok(dt)
    }
}

//! Client statistics: runs RPCs against the NAA of `NAA_SPEC` (or local mode), checks every
//! result and prints the handle's statistics ([`naaice::Naa::stats`]: RPCs, errors, bytes,
//! connect and MRSP time, latency percentiles).
//!
//! ```sh
//! NAA_SPEC=local:1:1 cargo run --example stats -- 1000
//! NAA_SPEC=127.0.0.1:12345:2:1 NAAICE_STATS=1 cargo run --example stats -- 1000 2
//! ```
//!
//! The arguments are the number of RPCs (default 1000) and the function code (default 1: the
//! built-in kernel that adds 1 to every byte; 2 adds 2, 3 does nothing); each RPC runs on a
//! 64-byte parameter in place and its result is checked. With `NAAICE_STATS=1` the process's
//! statistics follow in one line when it exits.

use anyhow::bail;
use naaice::{Naa, Param};

/// RPCs against the NAA of `NAA_SPEC`, then the handle's statistics.
#[derive(clap::Parser)]
struct Args {
    /// RPCs to run.
    #[arg(default_value_t = 1000)]
    count: u32,
    /// Function code.
    #[arg(default_value_t = 1)]
    fncode: u8,
}

fn main() -> anyhow::Result<()> {
    let Args { count, fncode } = clap::Parser::parse();
    let transport = naaice::discovery::environment::transport_from_env()?;
    let data = Param::from_vec(vec![0; 64]);
    let mut naa: Naa = Naa::create(&transport, fncode.into(), vec![data.clone()], vec![data])?;
    let step = fncode % 3;
    let mut expected = 0u8;
    for _ in 0..count {
        naa.invoke()?;
        let status = naa.wait()?;
        if !status.naa_error.is_success() {
            bail!("the NAA answered {}", status.naa_error);
        }
        expected = expected.wrapping_add(step);
        if naa.output(0)?.iter().any(|&b| b != expected) {
            bail!("a wrong result");
        }
    }
    println!("{count} RPCs checked");
    let stats = naa.stats();
    println!("handle: {stats}");
    naa.finalize();
    Ok(())
}

//! hello-naa: one RPC on an NAA through the middleware API (AP2).
//!
//! Built-in kernel 1 adds 1 to every byte of the parameter. `NAA_SPEC` says where the NAA is
//! (`local:1:1`: inside this process), `NAAICE_TRANSPORT` how to reach it (default `auto`).
use std::process::ExitCode;

use naaice::{Naa, Param};

fn main() -> ExitCode {
    match hello() {
        Ok(0) => ExitCode::SUCCESS,
        Ok(wrong) => {
            eprintln!("hello-naa: {wrong} bytes wrong");
            ExitCode::FAILURE
        }
        Err(e) => {
            // The message, e.g. "NAA selection: NAA_SPEC is not set".
            eprintln!("hello-naa: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One RPC; returns how many bytes came back wrong.
fn hello() -> naaice::Result<usize> {
    let transport = naaice::discovery::environment::transport_from_env()?;
    let data = Param::from_vec(vec![41; 1 << 20]); // 1 MiB, in place: input and output
    let mut naa: Naa = Naa::create(&transport, 1, vec![data.clone()], vec![data])?;
    naa.invoke()?; // sends the input and returns at once
    let status = naa.wait()?; // or poll naa.test() while doing other work
    let wrong = naa.output(0)?.iter().filter(|&&b| b != 42).count();
    let got = status.bytes_received;
    println!("{}: {got} bytes back, {wrong} wrong", status.naa_error);
    naa.finalize();
    Ok(wrong)
}

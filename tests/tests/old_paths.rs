//! The old flat module paths (`naaice::spec`, `naaice::naa_set`, …) still resolve for one
//! release, deprecated in favour of `naaice::discovery::spec`, `naaice::client::naa_set`, …
//! (importing one, `use naaice::spec;`, warns).
#![allow(deprecated)]

use naaice::spec;

#[test]
fn old_flat_paths_still_resolve() {
    let entries = spec::parse("local:1:1").expect("spec");
    assert_eq!(entries.len(), 1);
    let _: Option<naaice::naa::NaaOptions> = None;
    let mut none: Vec<naaice::Naa> = Vec::new();
    assert!(naaice::naa_set::wait_any(&mut none).is_none());
    let _ = naaice::environment::VARIABLES.len();
    let _ = naaice::select::Pool::new(entries);
    let _: Option<naaice::waiting::WaitPolicy> = None;
    let _: Option<naaice::connection::Connection> = None;
    let _ = naaice::stats::process();
    assert!(naaice::local::remove_kernel(naaice::core::FunctionCode::new(99).unwrap()).is_none());
    let _: Option<naaice::rpc_future::RpcFuture<'_, naaice::transport::AnyEndpoint>> = None;
}

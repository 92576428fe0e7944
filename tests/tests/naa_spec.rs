//! NAA selection from the environment (`NAA_SPEC`, `NAA_LOCAL_IP`, spec §6.3). The variables
//! are read once per process, so every case runs in its own child process.

use naaice::core::ReturnCode;
use naaice::discovery::spec::SpecError;
use naaice::swnaa::SoftNaaConfig;
use naaice::transport::soft::SoftTransport;
use naaice::{Error, Naa, Param};
use naaice_tests::{is_child, run_child, start_naa};

fn create(fncode: u32, inputs: usize) -> Result<Naa<naaice::transport::soft::SoftEndpoint>, Error> {
    let params = (0..inputs).map(|_| Param::zeroed(16)).collect();
    Naa::create(&SoftTransport::default(), fncode, params, vec![])
}

/// Child: selection, reuse after finalize, no match, wrong parameter count, NAA_LOCAL_IP.
#[test]
#[ignore = "run as a child process by selection_from_naa_spec"]
fn child_selection() {
    if !is_child() {
        return;
    }
    let a = create(1, 1).expect("first entry for fncode 1");
    let b = create(1, 1).expect("second entry for fncode 1");
    // Both entries for code 1 are held by this process: the error names them.
    assert!(matches!(
        create(1, 1),
        Err(Error::Spec(SpecError::Held { fncode: 1, ref held })) if held.len() == 2
    ));
    drop(a);
    let mut c = create(1, 1).expect("entry returned by finalize");
    c.invoke().unwrap();
    assert_eq!(c.wait().unwrap().naa_error, ReturnCode::SUCCESS);
    assert!(matches!(
        create(3, 1),
        Err(Error::Spec(SpecError::ParamCount {
            fncode: 3,
            expected: 2,
            got: 1
        }))
    ));
    create(3, 2).expect("fncode 3 with 2 inputs");
    assert!(matches!(
        create(7, 1),
        Err(Error::Spec(SpecError::NoMatch(7)))
    ));
    drop((b, c));
}

#[test]
fn selection_from_naa_spec() {
    let naa = start_naa(SoftNaaConfig {
        max_connections: 8,
        ..SoftNaaConfig::default()
    });
    let port = naa.local_addr().port();
    let spec = format!("127.0.0.1:{port}:1:1, localhost:{port}:1:1,127.0.0.1:{port}:3:2,");
    let out = run_child(
        "child_selection",
        &[("NAA_SPEC", &spec), ("NAA_LOCAL_IP", "127.0.0.1")],
    );
    assert!(
        out.status.success(),
        "child failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Child: `NAA_SPEC` as given must fail `naa_create` with the error text in NAA_EXPECT.
#[test]
#[ignore = "run as a child process by malformed_environment_is_a_clear_error"]
fn child_expect_error() {
    if !is_child() {
        return;
    }
    let expected = std::env::var("NAA_EXPECT").unwrap();
    let err = create(1, 1).expect_err("create must fail").to_string();
    assert!(err.contains(&expected), "error {err:?} lacks {expected:?}");
}

#[test]
fn malformed_environment_is_a_clear_error() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[], "NAA_SPEC is not set"),
        (&[("NAA_SPEC", "")], "NAA_SPEC is not set"),
        (&[("NAA_SPEC", "10.0.0.1:12345:1")], "found 3 fields"),
        (&[("NAA_SPEC", "10.0.0.1:port:1:1")], "port \"port\""),
        (&[("NAA_SPEC", "10.0.0.1:70000:1:1")], "port \"70000\""),
        (&[("NAA_SPEC", "10.0.0.1:1:x:1")], "function code \"x\""),
        (&[("NAA_SPEC", "10.0.0.1:1:1:1,10.0.0.2:1:1")], "entry 2"),
        (&[("NAA_SPEC", "10.0.0.1:1:1:many")], "param_count \"many\""),
        (
            &[("NAA_SPEC", "no-such-host.invalid:1:1:1")],
            "cannot resolve NAA address",
        ),
        (
            &[
                ("NAA_SPEC", "127.0.0.1:1:1:1"),
                ("NAA_LOCAL_IP", "no-such-host.invalid"),
            ],
            "NAA_LOCAL_IP",
        ),
    ];
    for (env, expected) in cases {
        let mut vars: Vec<(&str, &str)> = env.to_vec();
        vars.push(("NAA_EXPECT", expected));
        let out = run_child("child_expect_error", &vars);
        assert!(
            out.status.success(),
            "case {env:?}: child failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

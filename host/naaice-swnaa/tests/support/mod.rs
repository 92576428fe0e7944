//! What the integration tests of `naaice-swnaa` share: starting the server as a child whose
//! stderr is read line by line.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Spawns `cmd` with stdin and stdout closed and stderr piped; a thread of its own hands each
/// line of stderr to `each` until stderr closes or `each` returns false.
pub(crate) fn spawn_reading_stderr(
    cmd: &mut Command,
    mut each: impl FnMut(String) -> bool + Send + 'static,
) -> Child {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start naaice-swnaa");
    let stderr = child.stderr.take().expect("piped stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !each(line) {
                break;
            }
        }
    });
    child
}

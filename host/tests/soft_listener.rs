//! The software transport's listener against silent peers: the list of handshakes in
//! progress is bounded (the oldest gives way), and a real client still gets through.

use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use naaice::transport::soft::{MAX_PENDING_HANDSHAKES, SoftTransport};
use naaice::transport::{Incoming, Listener, Transport};

#[test]
fn pending_handshakes_are_bounded_and_a_client_still_gets_through() {
    let transport = SoftTransport::default();
    let mut listener = transport.listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr();
    // Beyond the kernel's backlog, connects wait for the listener to accept: from a thread.
    let client = thread::spawn(move || {
        let silent: Vec<TcpStream> = (0..MAX_PENDING_HANDSHAKES + 20)
            .map(|_| TcpStream::connect(addr).expect("TCP connect"))
            .collect();
        // After the silent ones, so it is the newest handshake.
        thread::sleep(Duration::from_millis(300));
        let result = transport.connect(addr, None, Instant::now() + Duration::from_secs(10));
        (result, silent)
    });
    let incoming = listener
        .next_request(Instant::now() + Duration::from_secs(20))
        .unwrap()
        .expect("the real client's request");
    assert!(
        listener.pending_handshakes() <= MAX_PENDING_HANDSHAKES,
        "{} handshakes pending",
        listener.pending_handshakes()
    );
    let _server_side = incoming.accept().unwrap();
    let (result, silent) = client.join().unwrap();
    result.expect("client connected");
    drop(silent);
}

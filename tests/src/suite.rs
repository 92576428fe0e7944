//! Test bodies shared by the end-to-end suites of every transport (`tests/rpc.rs` over the
//! software transport, `tests/verbs_rpc.rs` over verbs): each takes a way to connect, so the
//! same checks run on both.

use naaice::transport::{Endpoint, Transport};
use naaice::{Buffer, Connection, Error, Naa, NaaOptions, Param};
use naaice_core::ReturnCode;

/// Deterministic test bytes: `len` bytes that differ per `seed`.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// `data` with `n` added to every byte (what kernels 1 and 2 compute).
pub fn plus(data: &[u8], n: u8) -> Vec<u8> {
    data.iter().map(|b| b.wrapping_add(n)).collect()
}

/// One RPC with kernel 1 over `n` in-place regions of different sizes, for each `n` of
/// `counts`, on a fresh connection each (`connect(fncode)`).
pub fn in_place_regions<E: Endpoint>(
    mut connect: impl FnMut(u8) -> Connection<E>,
    counts: &[usize],
) {
    for &n in counts {
        let mut conn = connect(1);
        let data: Vec<Vec<u8>> = (0..n).map(|i| pattern(100 + i * 37, i as u8)).collect();
        let buffers: Vec<Buffer> = data.iter().map(|d| Buffer::from_slice(d)).collect();
        for b in &buffers {
            let id = conn.add_param(b).unwrap();
            conn.set_input(id).unwrap();
            conn.set_output(id).unwrap();
        }
        conn.do_mrsp().unwrap();
        let r = conn.do_transfer().unwrap();
        assert!(r.status.is_success());
        assert_eq!(
            r.bytes_received as usize,
            data[n - 1].len(),
            "last output's length"
        );
        for (b, d) in buffers.iter().zip(&data) {
            assert_eq!(b.to_vec(), plus(d, 1), "{n} regions");
        }
        conn.disconnect();
    }
}

/// One RPC with kernel 2 over one in-place region of each of `sizes`, on a fresh connection
/// each (`connect(fncode)`).
pub fn in_place_sizes<E: Endpoint>(mut connect: impl FnMut(u8) -> Connection<E>, sizes: &[usize]) {
    for &size in sizes {
        let mut conn = connect(2);
        let data = pattern(size, size as u8);
        let buf = Buffer::from_slice(&data);
        let id = conn.add_param(&buf).unwrap();
        conn.set_input(id).unwrap();
        conn.set_output(id).unwrap();
        conn.do_mrsp().unwrap();
        let r = conn.do_transfer().unwrap();
        assert_eq!(
            (r.status, r.bytes_received as usize),
            (ReturnCode::SUCCESS, size)
        );
        assert!(
            buf.to_vec() == plus(&data, 2),
            "content of the {size}-byte region"
        );
        conn.disconnect();
    }
}

/// Two inputs and one output of different sizes, three RPCs with kernel 1 on `conn` (made
/// for function code 1): the output starts zeroed and gains 1 per RPC.
pub fn separate_inputs_and_outputs<E: Endpoint>(conn: &mut Connection<E>) {
    let (a, b) = (
        Buffer::from_slice(&pattern(3000, 1)),
        Buffer::from_slice(&pattern(10, 2)),
    );
    let out = Buffer::zeroed(777);
    for (buf, input) in [(&a, true), (&b, true), (&out, false)] {
        let id = conn.add_param(buf).unwrap();
        if input {
            conn.set_input(id).unwrap()
        } else {
            conn.set_output(id).unwrap()
        }
    }
    conn.do_mrsp().unwrap();
    for rpc in 1..=3u8 {
        let r = conn.do_transfer().unwrap();
        assert_eq!(r.bytes_received, 777);
        assert_eq!(out.to_vec(), vec![rpc; 777]);
    }
}

/// `clients` AP2 clients at once against the NAA at `options`' address, each running `rpcs`
/// RPCs with kernel 1 on its own in-place region of `len + 100 · client` bytes and checking
/// the result.
pub fn concurrent_clients<T>(transport: &T, options: &NaaOptions, clients: u8, rpcs: u8, len: usize)
where
    T: Transport + Clone + 'static,
{
    let threads: Vec<_> = (0..clients)
        .map(|t| {
            let (transport, options) = (transport.clone(), options.clone());
            std::thread::spawn(move || {
                let p = Param::from_vec(pattern(len + usize::from(t) * 100, t));
                let mut h = Naa::create_with(&transport, 1, vec![p.clone()], vec![p], &options)?;
                let start = h.input(0)?.to_vec();
                for _ in 0..rpcs {
                    h.invoke()?;
                    assert!(h.wait()?.naa_error.is_success());
                }
                assert_eq!(h.output(0)?.to_vec(), plus(&start, rpcs));
                h.finalize();
                Ok::<_, Error>(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread").expect("client RPCs");
    }
}

/// On `conn` (made for the SLEEP kernel, NAA kernel timeout 100 ms): a kernel that sleeps
/// 300 ms is answered with KERNEL_TIMEOUT and no output; the next RPC follows at once and
/// succeeds (the late kernel's regions are never in the way), and so do more.
pub fn kernel_timeout_keeps_the_connection<E: Endpoint>(conn: &mut Connection<E>) {
    let buf = Buffer::from_slice(&pattern(16, 9));
    let id = conn.add_param(&buf).unwrap();
    conn.set_input(id).unwrap();
    conn.set_output(id).unwrap();
    conn.do_mrsp().unwrap();
    for _ in 0..2 {
        conn.set_immediate([30, 0, 0]).unwrap(); // the kernel sleeps 300 ms
        let r = conn.do_transfer().unwrap();
        assert_eq!(
            (r.status, r.bytes_received),
            (ReturnCode::KERNEL_TIMEOUT, 0)
        );
        conn.set_immediate([0, 0, 0]).unwrap();
        let r = conn
            .do_transfer()
            .expect("the RPC right after a kernel timeout");
        assert_eq!(r.status, ReturnCode::SUCCESS);
        assert!(conn.is_connected());
    }
}

/// On `conn` (made for the UNTIL_TIMEOUT kernel, NAA kernel timeout 100 ms): the kernel sees
/// its deadline pass and returns; its RPC is answered with KERNEL_TIMEOUT without the outputs
/// it computed, and the connection goes on.
pub fn kernel_timeout_is_visible_to_the_kernel<E: Endpoint>(conn: &mut Connection<E>) {
    let data = pattern(64, 3);
    let buf = Buffer::from_slice(&data);
    let id = conn.add_param(&buf).unwrap();
    conn.set_input(id).unwrap();
    conn.set_output(id).unwrap();
    conn.do_mrsp().unwrap();
    for _ in 0..2 {
        let r = conn.do_transfer().unwrap();
        assert_eq!(
            (r.status, r.bytes_received),
            (ReturnCode::KERNEL_TIMEOUT, 0)
        );
        assert_eq!(buf.to_vec(), data, "no outputs after a kernel timeout");
    }
}

//! Smoke tests of the Soft-RoCE VM harness (`tests/rxe-vm/run.sh`).
//!
//! A host-built Rust binary that links libibverbs and librdmacm, run inside the VM as a cargo
//! runner target:
//!
//! ```text
//! CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=$PWD/tests/rxe-vm/run.sh \
//!     cargo test --manifest-path tests/rxe-vm/smoke/Cargo.toml
//! ```
//!
//! The tests fail outside the VM: they check that the harness provides an active RDMA device,
//! that the verbs objects a transport needs can be created on it, and that rdma_cm resolves the
//! guest address (`RXE_VM_ADDR`) to that device.
#![cfg(target_os = "linux")]

mod ffi;
pub mod verbs;

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use crate::verbs::{Context, Cq, Mr, Pd, cm_bound_device, device_names};

    /// The RDMA device the harness creates.
    fn device() -> String {
        std::env::var("RXE_VM_DEV").expect("RXE_VM_DEV is set by tests/rxe-vm/run.sh")
    }

    #[test]
    fn harness_exports_the_rdma_environment() {
        let addr: Ipv4Addr = std::env::var("RXE_VM_ADDR")
            .expect("RXE_VM_ADDR is set by tests/rxe-vm/run.sh")
            .parse()
            .expect("RXE_VM_ADDR is an IPv4 address");
        assert!(!addr.is_loopback(), "{addr}");
        assert_eq!(std::env::var("NAAICE_REQUIRE_RDMA").as_deref(), Ok("1"));
    }

    #[test]
    fn rxe_device_is_listed_and_its_port_active() {
        let names = device_names().expect("device list");
        assert!(names.contains(&device()), "devices: {names:?}");
        let ctx = Context::open(&device()).expect("open the device");
        let (active, mtu) = ctx.port(1).expect("query port 1");
        assert!(active, "port 1 of {} is not ACTIVE", device());
        // MTU 9000 on the netdev gives RoCE MTU 4096.
        assert_eq!(mtu, 4096);
    }

    #[test]
    fn pd_mr_and_cq_can_be_created() {
        let ctx = Context::open(&device()).expect("open the device");
        let pd = Pd::new(&ctx).expect("protection domain");
        let mut buf = vec![0u8; 1 << 20];
        let base = buf.as_ptr() as usize;
        let mr = Mr::register(&pd, &mut buf).expect("register 1 MiB");
        let (addr, len, lkey, rkey) = mr.keys();
        assert_eq!((addr, len), (base, 1 << 20));
        assert!(lkey != 0 && rkey != 0, "lkey {lkey:#x} rkey {rkey:#x}");
        let _cq = Cq::new(&ctx, 16).expect("completion queue");
    }

    #[test]
    fn rdma_cm_resolves_the_guest_address_to_the_rxe_device() {
        let addr: Ipv4Addr = std::env::var("RXE_VM_ADDR")
            .expect("RXE_VM_ADDR")
            .parse()
            .expect("IPv4");
        assert_eq!(cm_bound_device(addr).expect("rdma_bind_addr"), device());
    }
}

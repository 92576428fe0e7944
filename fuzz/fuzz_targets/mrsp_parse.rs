//! Fuzz target: the MRSP codec on arbitrary bytes.
//!
//! `Packet::new_checked` and `Repr::parse` must never panic. When the view refuses the bytes,
//! `parse` must refuse them with the same error. When `parse` succeeds, the view must agree on
//! type and length, and `emit` must reproduce the message bytes exactly (with the two padding
//! bytes zeroed) and parse back to the same `Repr`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use naaice_core::wire::mrsp::{Packet, Repr};

fuzz_target!(|data: &[u8]| {
    let view = Packet::new_checked(data);
    let parsed = Repr::parse(data);
    match (view, parsed) {
        (Err(view_err), parsed) => {
            assert_eq!(parsed, Err(view_err), "parse and view disagree");
        }
        (Ok(packet), Ok(repr)) => {
            let len = packet.total_len();
            assert!(len <= data.len());
            assert_eq!(packet.msg_type(), repr.msg_type());
            assert_eq!(repr.buffer_len(), len);
            let mut out = [0xEEu8; 1024];
            assert_eq!(repr.emit(&mut out), Ok(len));
            let mut expected = data[..len].to_vec();
            expected[2] = 0;
            expected[3] = 0;
            assert_eq!(&out[..len], &expected[..], "re-emitted bytes differ");
            assert!(
                out[len..].iter().all(|&b| b == 0xEE),
                "emit wrote past the message"
            );
            // A buffer one byte short must be refused.
            assert!(repr.emit(&mut [0u8; 1024][..len - 1]).is_err());
            assert_eq!(Repr::parse(&out[..len]), Ok(repr), "re-parse differs");
        }
        (Ok(packet), Err(_)) => {
            // The view validates only the header; walking the records must not panic.
            for i in 0..=packet.count() {
                let _ = packet.request_record(i);
                let _ = packet.advert_record(i);
            }
            let _ = packet.error_code();
        }
    }
});

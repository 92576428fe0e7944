//! The firmware's behaviour on simulated hardware: MRSP placement and refusals, the region
//! table, kernel dispatch and timeouts, write-back, disconnects and the connection limit,
//! rkeys, and the idle loop (with `embedded-hal-mock` for the start line and the delay).

mod support;

use std::collections::HashSet;
use std::time::Duration;

use embedded_hal_mock::eh1::delay::{CheckedDelay, Transaction as DelayTransaction};
use embedded_hal_mock::eh1::digital::{
    Mock as PinMock, State as PinState, Transaction as PinTransaction,
};
use naaice_core::machine::WorkError;
use naaice_core::region::RegionFlags;
use naaice_core::wire::mrsp::MrspErrorCode;
use naaice_core::{Machine, Phase, ReturnCode};
use naaice_firmware::engine::{Access, Completion, CompletionKind, EngineEvent};
use support::*;

#[test]
fn mrsp_places_regions_at_requested_addresses_and_programs_the_table() {
    let (mut fw, _, _) = firmware();
    let engine = &mut fw.hardware_mut().engine;
    engine.events.push_back(EngineEvent::ConnectRequest(5));
    settle(&mut fw);
    // The MRSP receive is posted before the connection is accepted (spec §1.3).
    let engine = &fw.hardware().engine;
    assert_eq!(engine.accepted, [5]);
    assert!(engine.recvs[&5][0].message);

    let reply = connect_again_established(&mut fw, 5);
    let records = advert(&reply);
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].addr, MEMORY.base + 0x1000);
    assert_eq!(records[0].size, 1024);
    assert_eq!(records[1].addr, MEMORY.base + 0x2000);
    assert_eq!(records[1].size, 512);
    assert_ne!(records[0].rkey, 0);
    assert_ne!(records[0].rkey, records[1].rkey);

    let table = &fw.hardware().engine.tables[&5];
    assert_eq!(table.len(), 2);
    assert_eq!(table[&0].addr, records[0].addr);
    assert_eq!(table[&0].rkey, records[0].rkey);
    assert_eq!(table[&0].size, 1024);
    assert_eq!(table[&0].access, Access::REMOTE_WRITE);
    assert_eq!(table[&1].rkey, records[1].rkey);
    assert_eq!(
        table[&1].access,
        Access::REMOTE_WRITE.union(Access::LOCAL_READ)
    );
    assert_eq!(fw.server(5).map(|s| s.phase()), Some(Phase::MrspDone));
}

/// Finishes the MRSP of `conn` whose request is already accepted.
fn connect_again_established(
    fw: &mut TestFirmware<CountingPin, 2>,
    conn: u16,
) -> naaice_core::wire::mrsp::Repr {
    fw.hardware_mut()
        .engine
        .events
        .push_back(EngineEvent::Established(conn));
    settle(fw);
    let sends = fw.hardware().engine.sends.len();
    fw.hardware_mut()
        .engine
        .deliver(conn, &aar(&standard_request()));
    settle(fw);
    let reply = fw.hardware().engine.last_reply(conn);
    fw.hardware_mut().engine.complete_sends(conn, sends);
    settle(fw);
    reply
}

#[test]
fn internal_regions_get_memory_but_no_table_entry() {
    let (mut fw, _, _) = firmware();
    let mut records = standard_request();
    records.push(internal(MEMORY.base + 0x8000, 4096));
    let reply = connect_and_mrsp(&mut fw, 1, &records);
    assert_eq!(
        advert(&reply).len(),
        2,
        "internal regions are not advertised"
    );
    assert_eq!(fw.hardware().engine.tables[&1].len(), 2);
    let regions = fw.server(1).expect("open").regions().regions();
    assert_eq!(regions[2].local.map(|l| l.addr), Some(MEMORY.base + 0x8000));
}

fn refused_with(
    records: &[naaice_core::wire::mrsp::RequestRecord],
    max_regions: u8,
) -> MrspErrorCode {
    let mut c = config();
    c.max_regions = max_regions;
    let (mut fw, _, _) = firmware_with::<_, 2>(c, CountingPin::default(), 1);
    let reply = connect_and_mrsp(&mut fw, 3, records);
    let engine = &fw.hardware().engine;
    assert!(!engine.tables.contains_key(&3), "nothing is programmed");
    // The error SEND completed, then the connection is torn down (D-17).
    assert_eq!(engine.disconnected, [3]);
    assert_eq!(fw.connections(), 0);
    refusal(&reply)
}

#[test]
fn mrsp_address_outside_the_memory_map_is_refused_with_0x02() {
    let records = [param(RegionFlags::INPUT, MEMORY.base - 0x1000, 512)];
    assert_eq!(refused_with(&records, 32), MrspErrorCode::InvalidAddress);
    let records = [param(RegionFlags::INPUT, MEMORY.base + MEMORY.len, 512)];
    assert_eq!(refused_with(&records, 32), MrspErrorCode::InvalidAddress);
}

#[test]
fn mrsp_region_past_the_end_of_memory_is_refused_with_0x01() {
    let records = [param(
        RegionFlags::INPUT,
        MEMORY.base + MEMORY.len - 0x1000,
        0x2000,
    )];
    assert_eq!(refused_with(&records, 32), MrspErrorCode::NotEnoughMemory);
}

#[test]
fn mrsp_too_many_regions_is_refused_with_0x03() {
    let records: Vec<_> = (0..3)
        .map(|i| param(RegionFlags::INPUT, MEMORY.base + 0x1000 * i, 64))
        .collect();
    assert_eq!(refused_with(&records, 2), MrspErrorCode::TooManyRegions);
}

#[test]
fn memory_of_another_connection_is_refused_with_0x01() {
    let (mut fw, _, _) = firmware();
    advert(&connect_and_mrsp(&mut fw, 1, &standard_request()));
    // Overlaps the first connection's output region.
    let records = [param(RegionFlags::INPUT, MEMORY.base + 0x2100, 64)];
    let reply = connect_and_mrsp(&mut fw, 2, &records);
    assert_eq!(refusal(&reply), MrspErrorCode::NotEnoughMemory);
    assert_eq!(fw.connections(), 1);
    // Disjoint memory is fine.
    let records = [param(RegionFlags::INPUT, MEMORY.base + 0x4000, 64)];
    advert(&connect_and_mrsp(&mut fw, 2, &records));
    assert_eq!(fw.connections(), 2);
}

#[test]
fn rpc_starts_the_kernel_with_a_pulse_and_writes_back_with_the_return_code() {
    let start = PinMock::new(&[
        PinTransaction::set(PinState::High),
        PinTransaction::set(PinState::Low),
        PinTransaction::set(PinState::High),
        PinTransaction::set(PinState::Low),
    ]);
    let (mut fw, _, done) = firmware_with::<_, 2>(config(), start.clone(), 9);
    let reply = connect_and_mrsp(&mut fw, 4, &standard_request());
    advert(&reply);

    for rpc in 1..=2u32 {
        let imm = naaice_core::wire::imm::encode_request(
            naaice_core::FunctionCode::new(KERNEL).expect("code"),
            [0xA, 0xB, rpc as u8],
        );
        fw.hardware_mut().engine.write_imm(4, imm);
        settle(&mut fw);
        let job = fw
            .hardware()
            .kernels
            .jobs
            .last()
            .cloned()
            .expect("kernel loaded");
        assert_eq!(job.fncode, KERNEL);
        assert_eq!(job.user, [0xA, 0xB, rpc as u8]);
        assert_eq!(job.rpc, rpc);
        assert_eq!(job.addrs, [MEMORY.base + 0x1000, MEMORY.base + 0x2000]);
        assert_eq!(fw.server(4).map(|s| s.phase()), Some(Phase::Calculating));

        let writes = fw.hardware().engine.writes.len();
        done.signal(job.slot, 0x42);
        settle(&mut fw);
        let engine = &fw.hardware().engine;
        let (_, w) = engine.writes[writes];
        assert_eq!(engine.writes.len(), writes + 1);
        assert_eq!(w.local_addr, MEMORY.base + 0x2000);
        assert_eq!(w.len, 512);
        assert_eq!(w.remote_addr, standard_request()[1].addr);
        assert_eq!(w.rkey, standard_request()[1].rkey);
        assert_eq!(w.imm, Some(0x42 << 8));
        assert!(w.solicited);
        // The next RPC's receive is posted before the reply (spec §3.9).
        assert!(!engine.recvs[&4].is_empty());
        fw.hardware_mut().engine.complete_writes(4, writes);
        settle(&mut fw);
        assert_eq!(fw.server(4).map(|s| s.phase()), Some(Phase::DataReceiving));
    }
    let mut start = start;
    start.done();
}

#[test]
fn unknown_function_code_is_answered_with_socket_unavail() {
    let (mut fw, _, _) = firmware();
    advert(&connect_and_mrsp(&mut fw, 2, &standard_request()));
    fw.hardware_mut().engine.write_imm(2, call(77));
    settle(&mut fw);
    let engine = &fw.hardware().engine;
    assert!(fw.hardware().kernels.jobs.is_empty());
    let (_, w) = engine.writes.last().copied().expect("reply");
    assert_eq!(w.imm, Some(ReturnCode::SOCKET_UNAVAIL.to_imm()));
    assert_eq!(w.len, 0, "no data with an error code");
    assert!(w.solicited);
}

#[test]
fn kernel_over_its_deadline_is_aborted_and_answered_with_kernel_timeout() {
    let (mut fw, clock, done) = firmware();
    advert(&connect_and_mrsp(&mut fw, 2, &standard_request()));
    fw.hardware_mut().engine.write_imm(2, call(KERNEL));
    settle(&mut fw);
    // The loop sleeps no longer than until the kernel deadline.
    assert!(fw.step() <= Duration::from_secs(1));
    clock.advance_us(999_999);
    settle(&mut fw);
    assert!(fw.hardware().engine.writes.is_empty(), "not yet");
    clock.advance_us(1);
    settle(&mut fw);
    let (_, w) = fw.hardware().engine.writes[0];
    assert_eq!(w.imm, Some(ReturnCode::KERNEL_TIMEOUT.to_imm()));
    assert_eq!(w.len, 0);
    assert_eq!(fw.hardware().kernels.aborted, [0]);
    // A late completion of the aborted kernel changes nothing.
    done.signal(0, 0);
    fw.hardware_mut().engine.complete_writes(2, 0);
    settle(&mut fw);
    assert_eq!(fw.hardware().engine.writes.len(), 1);

    // The next RPC runs normally.
    fw.hardware_mut().engine.write_imm(2, call(OTHER_KERNEL));
    settle(&mut fw);
    assert_eq!(fw.hardware().kernels.jobs.len(), 2);
    done.signal(0, 0);
    settle(&mut fw);
    let (_, w) = fw.hardware().engine.writes[1];
    assert_eq!(w.imm, Some(0));
    assert_eq!(w.len, 512);
}

#[test]
fn kernel_status_wider_than_24_bits_is_a_fault() {
    let (mut fw, _, done) = firmware();
    advert(&connect_and_mrsp(&mut fw, 2, &standard_request()));
    fw.hardware_mut().engine.write_imm(2, call(KERNEL));
    settle(&mut fw);
    done.signal(0, 0x0100_0000);
    settle(&mut fw);
    let (_, w) = fw.hardware().engine.writes[0];
    assert_eq!(w.imm, Some(ReturnCode::KERNEL_FAILED.to_imm()));
}

#[test]
fn disconnect_clears_the_table_and_the_client_can_reconnect() {
    let (mut fw, _, _) = firmware();
    let first = advert(&connect_and_mrsp(&mut fw, 6, &standard_request()));
    // Disconnect while a kernel runs: it is aborted.
    fw.hardware_mut().engine.write_imm(6, call(KERNEL));
    settle(&mut fw);
    fw.hardware_mut()
        .engine
        .events
        .push_back(EngineEvent::Disconnected(6));
    settle(&mut fw);
    let engine = &fw.hardware().engine;
    assert_eq!(engine.cleared, [6]);
    assert_eq!(engine.disconnected, [6]);
    assert!(!engine.tables.contains_key(&6));
    assert_eq!(fw.hardware().kernels.aborted, [0]);
    assert_eq!(fw.connections(), 0);

    // Same client, same memory: accepted again, with fresh rkeys.
    let second = advert(&connect_and_mrsp(&mut fw, 6, &standard_request()));
    assert_eq!(second[0].addr, first[0].addr);
    assert_ne!(second[0].rkey, first[0].rkey);
    assert_ne!(second[1].rkey, first[1].rkey);
}

#[test]
fn connections_up_to_the_limit_each_with_its_own_table() {
    let (mut fw, _, done) = firmware();
    let a = advert(&connect_and_mrsp(&mut fw, 10, &standard_request()));
    let other = [param(
        RegionFlags::INPUT | RegionFlags::OUTPUT,
        MEMORY.base + 0x10000,
        256,
    )];
    let b = advert(&connect_and_mrsp(&mut fw, 11, &other));
    let engine = &mut fw.hardware_mut().engine;
    engine.events.push_back(EngineEvent::ConnectRequest(12));
    settle(&mut fw);
    assert_eq!(fw.hardware().engine.rejected, [12]);
    assert_eq!(fw.connections(), 2);
    let tables = &fw.hardware().engine.tables;
    assert_eq!(tables[&10].len(), 2);
    assert_eq!(tables[&11].len(), 1);
    assert_eq!(tables[&11][&0].rkey, b[0].rkey);
    assert!(a.iter().all(|r| r.rkey != b[0].rkey));

    // Both run RPCs independently.
    fw.hardware_mut().engine.write_imm(11, call(KERNEL));
    fw.hardware_mut().engine.write_imm(10, call(OTHER_KERNEL));
    settle(&mut fw);
    let jobs = fw.hardware().kernels.jobs.clone();
    assert_eq!(jobs.len(), 2);
    assert_eq!((jobs[0].slot, jobs[0].addrs[0]), (1, MEMORY.base + 0x10000));
    assert_eq!((jobs[1].slot, jobs[1].fncode), (0, OTHER_KERNEL));
    done.signal(1, 7);
    settle(&mut fw);
    let (conn, w) = fw.hardware().engine.writes[0];
    assert_eq!(
        (conn, w.imm, w.local_addr),
        (11, Some(7 << 8), MEMORY.base + 0x10000)
    );

    // A freed slot takes the next connection.
    fw.hardware_mut()
        .engine
        .events
        .push_back(EngineEvent::Disconnected(10));
    settle(&mut fw);
    advert(&connect_and_mrsp(&mut fw, 12, &standard_request()));
    assert_eq!(fw.connections(), 2);
}

#[test]
fn rkeys_are_unpredictable_nonzero_and_unique() {
    let mut keys = Vec::new();
    for seed in [1u8, 2] {
        let (mut fw, _, _) = firmware_with::<_, 1>(config(), CountingPin::default(), seed);
        for round in 0..8 {
            let records: Vec<_> = (0..4)
                .map(|i| param(RegionFlags::INPUT, MEMORY.base + 0x1000 * i, 64))
                .collect();
            let reply = advert(&connect_and_mrsp(&mut fw, round, &records));
            keys.extend(reply.iter().map(|r| r.rkey));
            fw.hardware_mut()
                .engine
                .events
                .push_back(EngineEvent::Disconnected(round));
            settle(&mut fw);
        }
    }
    assert_eq!(keys.len(), 64);
    assert!(keys.iter().all(|&k| k != 0));
    let unique: HashSet<_> = keys.iter().collect();
    assert_eq!(unique.len(), keys.len());
    // Not a counter: successive differences are not constant.
    let steps: HashSet<u32> = keys.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    assert!(steps.len() > 32);
}

#[test]
fn idle_loop_sleeps_until_the_next_deadline_at_most() {
    let (mut fw, clock, _) = firmware();
    // Nothing open: the poll interval (100 µs).
    let mut delay = CheckedDelay::new(&[
        DelayTransaction::delay_us(100),
        DelayTransaction::delay_us(30),
    ]);
    fw.idle(&mut delay);
    // A connection request: work was done, so no sleep.
    fw.hardware_mut()
        .engine
        .events
        .push_back(EngineEvent::ConnectRequest(1));
    fw.idle(&mut delay);
    // Its MRSP deadline (2 s) is 30 µs away: sleep 30 µs.
    settle(&mut fw);
    clock.advance_us(2_000_000 - 30);
    fw.idle(&mut delay);
    delay.done();
    // The deadline passes: the connection is dropped.
    clock.advance_us(30);
    settle(&mut fw);
    assert_eq!(fw.connections(), 0);
    assert_eq!(fw.hardware().engine.disconnected, [1]);
}

#[test]
fn refused_posts_fail_the_connection() {
    let (mut fw, _, _) = firmware();
    advert(&connect_and_mrsp(&mut fw, 2, &standard_request()));
    fw.hardware_mut().engine.write_imm(2, call(77));
    fw.hardware_mut().engine.refuse_posts = true;
    settle(&mut fw);
    assert_eq!(fw.connections(), 0);
    assert_eq!(fw.hardware().engine.disconnected, [2]);
}

#[test]
fn client_error_signal_and_failed_work_end_the_connection() {
    let (mut fw, _, _) = firmware();
    advert(&connect_and_mrsp(&mut fw, 2, &standard_request()));
    fw.hardware_mut().engine.write_imm(2, 0);
    settle(&mut fw);
    assert!(
        fw.hardware().kernels.jobs.is_empty(),
        "no stale kernel (D-07)"
    );
    assert_eq!(fw.connections(), 0);

    advert(&connect_and_mrsp(&mut fw, 3, &standard_request()));
    fw.hardware_mut()
        .engine
        .events
        .push_back(EngineEvent::Completion(
            3,
            Completion {
                wr_id: 0xdead,
                kind: CompletionKind::Failed(WorkError::RetryExceeded),
            },
        ));
    settle(&mut fw);
    assert_eq!(fw.connections(), 0);
}

#[test]
fn malformed_request_and_events_for_unknown_connections_are_harmless() {
    let (mut fw, _, _) = firmware();
    let engine = &mut fw.hardware_mut().engine;
    engine.events.push_back(EngineEvent::Established(99));
    engine.events.push_back(EngineEvent::Disconnected(98));
    engine.events.push_back(EngineEvent::ConnectRequest(1));
    settle(&mut fw);
    // A count that promises more records than the message holds: refused as malformed
    // (0x02, the spec's closest code), nothing allocated.
    let mut msg = aar(&standard_request());
    msg[1] = 3;
    fw.hardware_mut().engine.deliver(1, &msg);
    settle(&mut fw);
    let reply = fw.hardware().engine.last_reply(1);
    assert_eq!(refusal(&reply), MrspErrorCode::InvalidAddress);
    assert!(fw.hardware().engine.tables.is_empty());

    // A count over the limit is answered with 0x03 before anything else is read.
    let mut msg = aar(&standard_request());
    msg[1] = 200;
    fw.hardware_mut()
        .engine
        .events
        .push_back(EngineEvent::ConnectRequest(2));
    settle(&mut fw);
    fw.hardware_mut().engine.deliver(2, &msg);
    settle(&mut fw);
    let reply = fw.hardware().engine.last_reply(2);
    assert_eq!(refusal(&reply), MrspErrorCode::TooManyRegions);
    assert!(fw.hardware().engine.tables.is_empty());
}

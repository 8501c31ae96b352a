//! Laminar's program on the emulator, workflow by workflow (thesis §5.3).

use rmt::laminar::example::table_5_1_connection;
use rmt::laminar::program::table;
use rmt::laminar::program::{program, register, LaminarConfig, FROZEN};
use rmt::laminar::receiver::Receiver;
use rmt::laminar::segment::{flags, HostCommand, HostEvent, TcpSegment};
use rmt::laminar::{install, remove, ConnectionSpec, ControlPlane};
use rmt::pipeline::{ControlError, InjectError};
use rmt::pktgen::GeneratorApp;
use rmt::program::Port;
use rmt::{Pipeline, PipelineConfig};

fn spec() -> ConnectionSpec {
    ConnectionSpec {
        rx_buffer_size: 4096,
        rx_avail: 4096,
        tx_base_seq: 5000,
        tx_next_ack: 5000,
        tx_credits: 1000,
        credit_grant: 300,
        tx_remote_avail: 10_000,
        ..table_5_1_connection()
    }
}

fn pipeline(spec: &ConnectionSpec) -> Pipeline {
    let mut p =
        Pipeline::load(program(LaminarConfig::default()), PipelineConfig::default()).unwrap();
    install(&mut p, 0, spec).unwrap();
    p
}

fn reg(p: &Pipeline, name: &str) -> u64 {
    p.register_read(name, 0).unwrap()
}

/// A segment from the peer: `seq`, `ack`, `len` payload bytes (value 7).
fn from_peer(spec: &ConnectionSpec, seq: u32, ack: u32, len: usize) -> Vec<u8> {
    TcpSegment {
        src_ip: spec.remote_ip,
        dst_ip: spec.local_ip,
        src_port: spec.remote_port,
        dst_port: spec.local_port,
        seq,
        ack,
        flags: flags::ACK,
        window: 2000,
        sack: None,
        payload: vec![7; len],
    }
    .emit()
}

fn outputs(p: &mut Pipeline) -> (Vec<TcpSegment>, Vec<HostEvent>) {
    let (mut net, mut host) = (Vec::new(), Vec::new());
    for e in p.take_emitted() {
        match e.port {
            Port::Dma(_) => host.push(HostEvent::parse(&e.bytes).unwrap()),
            _ => net.push(TcpSegment::parse(&e.bytes).unwrap()),
        }
    }
    (net, host)
}

#[test]
fn ingress_is_read_only_and_egress_has_one_register_per_stage_in_thesis_order() {
    let p = program(LaminarConfig::default());
    let ingress_registers: usize = p
        .ingress
        .iter()
        .flat_map(|s| &s.tables)
        .flat_map(|t| &t.actions)
        .map(|a| a.registers.len())
        .sum();
    assert_eq!(ingress_registers, 0);
    let egress: Vec<&str> = p.egress.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        egress,
        [
            "rx-next-seq",
            "rx-avail",
            "rx-ooo-tail",
            "rx-ooo-head",
            "tx-next-ack",
            "tx-dupack-cnt",
            "tx-avail",
            "tx-credits",
            "tx-remote-avail"
        ]
    );
    assert!(Pipeline::load(p, PipelineConfig::default()).is_ok());
}

#[test]
fn in_order_data_is_placed_notified_and_acknowledged() {
    let mut r = Receiver::new(PipelineConfig::default(), LaminarConfig::default(), spec()).unwrap();
    let data: Vec<u8> = (0..300u16).map(|i| i as u8).collect();
    for (i, chunk) in data.chunks(100).enumerate() {
        let bytes = r.segment(1000 + 100 * i as u32, chunk);
        r.receive(10 * i as u64, &bytes).unwrap();
    }
    r.settle(|_| {}).unwrap();
    assert_eq!(r.delivered, data);
    // An ACK takes rx-next-seq when its pseudo segment passes stage 1, 300
    // ns after the segment: by then all three were in (cumulative ACKs).
    let acks: Vec<u32> = r.sent.iter().map(|s| s.ack).collect();
    assert_eq!(acks, [1300, 1300, 1300]);
    assert_eq!(r.sent[2].window, 4096 - 300);
}

#[test]
fn an_in_order_segment_beyond_the_window_is_rolled_back_and_meanwhile_all_are_dropped() {
    let s = ConnectionSpec {
        rx_avail: 1000,
        ..spec()
    };
    let mut p = pipeline(&s);
    p.enable_trace();
    p.inject(0, Port::Mac(0), &from_peer(&s, 1000, 5000, 1200))
        .unwrap();
    // Before the control plane acts, the next segment arrives.
    p.inject(10, Port::Mac(0), &from_peer(&s, 2200, 5000, 100))
        .unwrap();
    p.run_until_idle(10_000);
    assert_eq!(
        reg(&p, register::RX_AVAIL),
        FROZEN,
        "window frozen while the rollback is pending"
    );
    let (acks, host) = outputs(&mut p);
    assert!(host.is_empty(), "nothing reached the host: {host:?}");
    assert_eq!(
        acks.iter().map(|a| a.window).collect::<Vec<_>>(),
        [0, 0],
        "zero-window ACKs"
    );
    let mut control = ControlPlane::default();
    control.handle(&mut p).unwrap();
    assert_eq!(
        control.rollbacks, 1,
        "one rollback, for the first segment only"
    );
    assert_eq!(
        (reg(&p, register::RX_NEXT_SEQ), reg(&p, register::RX_AVAIL)),
        (1000, 1000)
    );
    // The state is whole again: a segment in the window is accepted.
    p.inject(20_000, Port::Mac(0), &from_peer(&s, 1000, 5000, 1000))
        .unwrap();
    p.run_until_idle(30_000);
    assert_eq!(
        (reg(&p, register::RX_NEXT_SEQ), reg(&p, register::RX_AVAIL)),
        (2000, 0)
    );
}

#[test]
fn transmission_spends_credits_respects_the_peer_window_and_drops_stale_segments() {
    let s = ConnectionSpec {
        tx_credits: 150,
        tx_remote_avail: 250,
        ..spec()
    };
    let mut p = pipeline(&s);
    let tx = |offset: u32, len: usize| {
        HostCommand::Tx {
            conn: 0,
            offset,
            payload: vec![1; len],
        }
        .emit()
    };
    p.inject(0, Port::Dma(0), &tx(0, 100)).unwrap();
    p.inject(10, Port::Dma(0), &tx(100, 100)).unwrap();
    p.inject(20, Port::Dma(0), &tx(200, 100)).unwrap();
    p.run_until_idle(1_000);
    let (net, _) = outputs(&mut p);
    let seqs: Vec<u32> = net.iter().map(|s| s.seq).collect();
    // 150 credits: the first spends 100, the second the last 50, the third
    // finds none (§5.3.2.2 ④).
    assert_eq!(seqs, [5000, 5100]);
    assert_eq!(net[0].ack, 1000, "TX carries the receive side's ACK");
    assert_eq!(reg(&p, register::TX_CREDITS), 0);
    assert_eq!(reg(&p, register::TX_AVAIL), 300);
    // The peer acknowledges 5100 in order: tx-next-ack and the window move.
    p.inject(2_000, Port::Mac(0), &from_peer(&s, 1000, 5100, 0))
        .unwrap();
    p.run_until_idle(3_000);
    assert_eq!(reg(&p, register::TX_NEXT_ACK), 5100);
    assert_eq!(reg(&p, register::TX_AVAIL), 200);
    assert_eq!(reg(&p, register::TX_REMOTE_AVAIL), 2000);
    // A segment wholly below tx-next-ack is stale and dropped (①).
    p.register_write(register::TX_CREDITS, 0, 1000).unwrap();
    p.inject(4_000, Port::Dma(0), &tx(0, 100)).unwrap();
    p.run_until_idle(5_000);
    assert!(outputs(&mut p).0.is_empty());
    // Flow control (⑤): more in flight than the peer's window is dropped.
    p.inject(6_000, Port::Dma(0), &tx(100, 2100)).unwrap();
    p.run_until_idle(7_000);
    assert!(outputs(&mut p).0.is_empty());
}

#[test]
fn three_duplicate_acks_trigger_fast_retransmit_and_halve_the_credits() {
    let s = spec();
    let mut p = pipeline(&s);
    p.register_write(register::TX_AVAIL, 0, 500).unwrap();
    for i in 0..4 {
        p.inject(i * 10, Port::Mac(0), &from_peer(&s, 1000, 5000, 0))
            .unwrap();
    }
    p.run_until_idle(1_000);
    let (_, host) = outputs(&mut p);
    assert_eq!(
        host,
        [HostEvent::Retransmit {
            conn: 0,
            tx_next_ack: 5000
        }],
        "once, at the third"
    );
    assert_eq!(reg(&p, register::TX_CREDITS), 500);
    assert_eq!(reg(&p, register::TX_DUPACK_CNT), 4);
    p.inject(2_000, Port::Mac(0), &from_peer(&s, 1000, 5100, 0))
        .unwrap();
    p.run_until_idle(3_000);
    assert_eq!(
        reg(&p, register::TX_DUPACK_CNT),
        0,
        "a new ACK resets the count"
    );
}

#[test]
fn only_in_order_acks_update_the_remote_window_and_an_ack_beyond_sent_data_resets() {
    let s = spec();
    let mut p = pipeline(&s);
    p.register_write(register::TX_AVAIL, 0, 500).unwrap();
    // Out of order (seq ahead of rx-next-seq): the window stays.
    p.inject(0, Port::Mac(0), &from_peer(&s, 1500, 5100, 10))
        .unwrap();
    p.run_until_idle(1_000);
    assert_eq!(reg(&p, register::TX_REMOTE_AVAIL), 10_000);
    assert_eq!(
        reg(&p, register::TX_NEXT_ACK),
        5100,
        "the ACK itself counts"
    );
    // An ACK for data never sent goes to the control plane.
    p.inject(2_000, Port::Mac(0), &from_peer(&s, 1000, 9000, 0))
        .unwrap();
    p.run_until_idle(3_000);
    let mut control = ControlPlane::default();
    control.handle(&mut p).unwrap();
    assert_eq!(control.ack_resets, 1);
}

#[test]
fn the_generator_grants_credits_with_periodic_syncs() {
    let s = spec();
    let mut p = pipeline(&s);
    // Two packets per batch: connection 0 and connection 1, which is not
    // installed and so is dropped in ingress.
    p.add_generator(GeneratorApp {
        app: 0,
        start_ns: 0,
        period_ns: 1_000,
        packets: 2,
    });
    p.advance_to(2_500);
    let (_, host) = outputs(&mut p);
    let credits: Vec<u32> = host
        .iter()
        .map(|e| match e {
            HostEvent::Sync { credits, .. } => *credits,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(credits, [1300, 1600, 1900]);
    assert_eq!(p.counters().ingress_dropped, 3);
}

#[test]
fn with_sack_an_ack_carries_the_out_of_order_interval() {
    let config = PipelineConfig::default();
    let mut r = Receiver::new(
        config.clone(),
        LaminarConfig {
            sack: true,
            ..LaminarConfig::default()
        },
        spec(),
    )
    .unwrap();
    let bytes = r.segment(1500, &[1; 200]);
    r.receive(0, &bytes).unwrap();
    r.settle(|_| {}).unwrap();
    assert_eq!(
        r.sent.last().map(|a| (a.ack, a.sack)),
        Some((1000, Some((1500, 1700))))
    );
    let mut plain = Receiver::new(config, LaminarConfig::default(), spec()).unwrap();
    plain.receive(0, &bytes).unwrap();
    plain.settle(|_| {}).unwrap();
    assert_eq!(plain.sent.last().map(|a| a.sack), Some(None));
}

#[test]
fn malformed_packets_are_errors_at_every_port() {
    let s = spec();
    let mut p = pipeline(&s);
    let good = from_peer(&s, 1000, 5000, 10);
    for len in 0..good.len() - 10 {
        let err = p.inject(0, Port::Mac(0), &good[..len]).unwrap_err();
        assert!(matches!(err, InjectError::Parse(_)), "{len}: {err}");
    }
    assert!(p.inject(0, Port::Dma(0), &[9; 12]).is_err());
    assert!(p
        .inject(
            0,
            Port::Dma(0),
            &HostCommand::Tx {
                conn: 0,
                offset: 0,
                payload: vec![]
            }
            .emit()
        )
        .is_err());
    assert!(p.inject(0, Port::Generator(0), &[1, 2]).is_err());
    let err = p
        .inject(0, Port::Recirculation, &good)
        .unwrap_err()
        .to_string();
    assert!(err.contains("never recirculates"), "{err}");
}

/// Entries the connection, translation and header tables hold.
fn table_entries(p: &Pipeline) -> [usize; 3] {
    [table::CONNECTIONS, table::TRANSLATION, table::HEADERS].map(|t| p.table_len(t).unwrap())
}

#[test]
fn a_removed_connection_leaves_no_table_entries_and_its_segments_miss() {
    let s = spec();
    let mut p = pipeline(&s);
    assert_eq!(table_entries(&p), [1, 1, 1]);
    remove(&mut p, 0).unwrap();
    assert_eq!(table_entries(&p), [0, 0, 0]);
    let before = p.counters();
    p.inject(0, Port::Mac(0), &from_peer(&s, 1000, 5000, 100))
        .unwrap();
    p.run_until_idle(10_000);
    let after = p.counters();
    assert_eq!(
        after.ingress_dropped - before.ingress_dropped,
        1,
        "the segment missed the connection table and was dropped"
    );
    assert_eq!(after.egress_processed, before.egress_processed);
    assert!(p.take_emitted().is_empty(), "no ACK, no host write");
    assert_eq!(
        remove(&mut p, 0),
        Err(ControlError::NoEntry {
            table: table::HEADERS.into(),
            key: vec![0],
        }),
        "a connection is removed once"
    );
}

#[test]
fn a_new_connection_reusing_a_removed_slot_receives_and_the_old_one_stays_gone() {
    let old = spec();
    let mut p = pipeline(&old);
    remove(&mut p, 0).unwrap();
    let new = ConnectionSpec {
        remote_port: old.remote_port + 1,
        rx_next_seq: 7000,
        ..old
    };
    install(&mut p, 0, &new).unwrap();
    assert_eq!(table_entries(&p), [1, 1, 1]);
    p.inject(0, Port::Mac(0), &from_peer(&old, 1000, 5000, 100))
        .unwrap();
    p.inject(10, Port::Mac(0), &from_peer(&new, 7000, 5000, 100))
        .unwrap();
    p.run_until_idle(10_000);
    assert_eq!(reg(&p, register::RX_NEXT_SEQ), 7100);
    let (acks, host) = outputs(&mut p);
    assert_eq!(acks.len(), 1, "only the new connection's segment: {acks:?}");
    assert_eq!((acks[0].dst_port, acks[0].ack), (new.remote_port, 7100));
    assert!(
        matches!(&host[..], [HostEvent::RxData { conn: 0, payload, .. }] if payload.len() == 100),
        "{host:?}"
    );
}

//! Bytes at any port of a pipeline running Laminar's program: each is
//! parsed or refused with an error, never a panic, and whatever the pipeline
//! emits parses back (a DMA record to the host, a TCP segment to the wire).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmt::laminar::example::table_5_1_connection;
use rmt::laminar::segment::{HostEvent, TcpSegment};
use rmt::laminar::{install, program, remove, ControlPlane, LaminarConfig};
use rmt::program::Port;
use rmt::{Pipeline, PipelineConfig};

const PORTS: [Port; 4] = [
    Port::Mac(0),
    Port::Dma(0),
    Port::Generator(0),
    Port::Recirculation,
];

// The input is a sequence of packets, each [port selector][length][bytes];
// selector 0xff also removes and reinstalls the connection after its packet.
fuzz_target!(|data: &[u8]| {
    let laminar = LaminarConfig { connections: 4, sack: data.first().is_some_and(|b| b & 0x80 != 0) };
    let Ok(mut p) = Pipeline::load(program(laminar), PipelineConfig::default()) else { return };
    if install(&mut p, 0, &table_5_1_connection()).is_err() {
        return;
    }
    let mut control = ControlPlane::default();
    let mut rest = data;
    let mut t = 0;
    while let [sel, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (packet, next) = tail.split_at(n);
        t += 100;
        let _ = p.inject(t, PORTS[usize::from(*sel) % PORTS.len()], packet);
        if *sel == 0xff {
            // The connection closes and its slot is taken again.
            let _ = remove(&mut p, 0);
            let _ = install(&mut p, 0, &table_5_1_connection());
        }
        p.run_until_idle(t + 10_000);
        let _ = control.handle(&mut p);
        for out in p.take_emitted() {
            match out.port {
                Port::Dma(_) => assert!(HostEvent::parse(&out.bytes).is_ok()),
                _ => assert!(TcpSegment::parse(&out.bytes).is_ok()),
            }
        }
        rest = next;
    }
});

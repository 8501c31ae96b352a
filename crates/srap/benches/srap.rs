//! Port steering costs, excluding the network and /proc reads.
//!
//! `cargo bench -p srap --bench srap`; ids are `srap/<name>` (a group, so
//! `steer bench criterion-json` and the matrix case `srap-bench` read them).
//!
//! - `plan_64_flows_64_cpus`: ports for 64 flows over a 64-queue receiver
//!   (52-byte random key, 128-entry table), full range free. Goal < 100 us.
//! - `port_for_queue`: one port for a given queue (64 queues), random
//!   start. Goal < 1 us.
//! - `queue_of`: one candidate port's queue (two table lookups).
//! - `plan_from_config_64_flows_64_cpus`: the same including building the
//!   predictor (what `steer ports plan` does once it has the config).
//! - `predictor_new`: building the per-destination tables.
//! - `allocator_lease/pending=K`: what the allocator does for one lease
//!   request (then a release), with K leases to the same destination not
//!   yet connected (the LD_PRELOAD benchmark's one-by-one mode builds up
//!   ~2000); host ports from the real /proc, cached as the server does.

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{criterion_group, criterion_main, Criterion};
use rand::{rngs::StdRng, Rng, SeedableRng};
use rss::{L4Proto, RssConfig, RssKey};
use srap::alloc::Allocator;
use srap::{plan, PlanOptions, PortPredictor, PortRange};

fn config(queues: u32) -> RssConfig {
    let mut rng = StdRng::seed_from_u64(52);
    let key: Vec<u8> = (0..52).map(|_| rng.gen()).collect();
    RssConfig::ethtool_default(RssKey::new(key).expect("52 bytes"), queues, 128).expect("valid")
}

fn predictor(queues: u32) -> PortPredictor {
    let local: IpAddr = "10.77.1.1".parse().expect("address");
    let remote: IpAddr = "10.77.1.2".parse().expect("address");
    PortPredictor::new(&config(queues), local, remote, 5201, L4Proto::Tcp).expect("predictor")
}

fn bench(c: &mut Criterion) {
    let mut c = c.benchmark_group("srap");
    let p = predictor(64);
    let options = PlanOptions::default();
    c.bench_function("plan_64_flows_64_cpus", |b| {
        b.iter(|| plan(black_box(&p), 64, &options).expect("plan"))
    });
    let cfg = config(64);
    let (l, r): (IpAddr, IpAddr) = (
        "10.77.1.1".parse().expect("a"),
        "10.77.1.2".parse().expect("a"),
    );
    c.bench_function("plan_from_config_64_flows_64_cpus", |b| {
        b.iter(|| {
            srap::plan_from_config(black_box(&cfg), l, r, 5201, L4Proto::Tcp, 64, &options)
                .expect("plan")
        })
    });
    let range = PortRange::LINUX_DEFAULT;
    let mut q = 0u32;
    c.bench_function("port_for_queue", |b| {
        b.iter(|| {
            q = (q + 1) % 64;
            p.port_for_queue(black_box(q), range, |_| true)
        })
    });
    let mut port = 32768u16;
    c.bench_function("queue_of", |b| {
        b.iter(|| {
            port = port.wrapping_add(1);
            p.queue_of(black_box(port))
        })
    });
    c.bench_function("predictor_new", |b| {
        b.iter(|| PortPredictor::new(black_box(&cfg), l, r, 5201, L4Proto::Tcp).expect("p"))
    });
    for pending in [0usize, 16, 2000] {
        let alloc = allocator_with_pending(pending);
        let id = format!("allocator_lease/pending={pending}");
        c.bench_function(&id, |b| {
            b.iter(|| {
                let lease = alloc.lease(L4Proto::Tcp, Some(l), r, 5201).expect("lease");
                alloc.release(lease.lease).expect("release");
            })
        });
    }
    c.finish();
}

/// An allocator for 10.77.1.2 (8 queues) holding `pending` unconnected
/// leases from 10.77.1.1 to it (a grace period longer than the run).
fn allocator_with_pending(pending: usize) -> Allocator {
    let (l, r): (IpAddr, IpAddr) = (
        "10.77.1.1".parse().expect("a"),
        "10.77.1.2".parse().expect("a"),
    );
    let alloc = Allocator::new("/proc", std::time::Duration::from_secs(3600));
    alloc.set_config(r, config(8)).expect("config");
    for _ in 0..pending {
        alloc.lease(L4Proto::Tcp, Some(l), r, 5201).expect("lease");
    }
    alloc
}

criterion_group!(benches, bench);
criterion_main!(benches);

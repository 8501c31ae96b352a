//! Simulator replay rate and controller recompute time.
//!
//! `cargo bench -p lb --bench lb`. The replay benchmark preloads the Auckland
//! capture (docs/traces.md; 16 copies, 500k packets) and times the dispatch +
//! Toeplitz hash + per-core count loop (with the controller ticks it triggers) for one policy;
//! the controller benchmarks recompute a 1,000-server x 64-core x 512-bucket
//! table.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lb::controller::{crossrss_table, AgentReport, CrossRssPlus, PlusParams};
use lb::rng::SplitMix64;
use lb::sim::{Policy, Replay, SimConfig, Simulator};
use lb::Trace;

fn replay(c: &mut Criterion) {
    // Found where every test finds the shared captures (STEER_TRACES, else
    // traces/, else ../shared/traces: docs/traces.md); missing, the
    // benchmark fails and says so rather than leave the replay out.
    let path = testkit::shared_trace("libtrace_auckland_atm_2000-01-25_oneway_rawip.pcap");
    let trace = Trace::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let replay = Replay::new(&trace, 10.0, 16, 10_000_000_000).expect("replay");
    let sim = Simulator::new(&replay, SimConfig::default()).expect("simulator");
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(replay.packets.len() as u64));
    group.sample_size(20);
    for policy in [Policy::Hash, Policy::Crossrss, Policy::CrossrssPlus] {
        group.bench_with_input(
            BenchmarkId::from_parameter(policy.name()),
            &policy,
            |b, &p| b.iter(|| sim.run_counts(p).expect("run")),
        );
    }
    group.finish();
}

fn reports(servers: u32, cores: usize, buckets: usize) -> Vec<AgentReport> {
    let mut rng = SplitMix64::new(42);
    (0..servers)
        .map(|s| AgentReport::random(s, cores, buckets, 100_000, &mut rng))
        .collect()
}

fn controller(c: &mut Criterion) {
    let (servers, cores, buckets) = (1000, 64, 512);
    let reports = reports(servers, cores, buckets);
    let mut group = c.benchmark_group("controller_1000x64x512");
    group.sample_size(20);
    group.bench_function("crossrss", |b| {
        b.iter(|| crossrss_table(&reports, buckets).expect("table"))
    });
    let new_load: Vec<f64> = (0..buckets).map(|b| (b % 17) as f64).collect();
    let mut plus = CrossRssPlus::new(buckets, PlusParams::default());
    group.bench_function("crossrss-plus", |b| {
        b.iter(|| plus.update(&reports, &new_load, 1000.0).expect("table"))
    });
    group.finish();
}

criterion_group!(benches, replay, controller);
criterion_main!(benches);

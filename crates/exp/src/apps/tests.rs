//! Parameters, the summary and the result's shape, without a lab; and,
//! as root, the data path's side of a stack started and let go.

use super::*;
use plot::text::Present;
use toe::EngineName;

fn run_of(rate: f64, p99: Option<f64>) -> ClientRun {
    ClientRun {
        requests: (rate * 2.0) as u64,
        seconds: 2.0,
        errors: 0,
        p50_us: p99.map(|p| p / 2.0),
        p99_us: p99,
        p999_us: None,
    }
}

fn sample(stack: Stack, cell: &str, rate: f64, p99: Option<f64>) -> Sample {
    let client = run_of(rate, p99);
    Sample {
        repetition: 0,
        stack,
        workload: Workload::NginxSmall,
        cell: cell.into(),
        id: format!("{cell},{}", stack.name()),
        rate: client.rate(),
        verification: Verification {
            checked: 3,
            ..Verification::default()
        },
        server_errors: Vec::new(),
        server_cpu_s: Some(1.0),
        client_cpu_s: Some(0.5),
        server_cpu_us_per_request: Some(1e6 / (rate * 2.0)),
        client_cpu_us_per_request: Some(0.5e6 / (rate * 2.0)),
        client,
    }
}

fn params() -> AppsParams {
    AppsParams {
        workload: vec![Workload::NginxSmall],
        engines: Engines::of(&[EngineName::Toe]),
        ..AppsParams::default()
    }
}

fn result(samples: Vec<Sample>) -> AppsResult {
    let p = params();
    let output = summarize(&p, samples, Vec::new());
    Report::new(p, output)
}

#[test]
fn cells_stand_beside_linux_with_ratios() {
    let r = result(vec![
        sample(Stack::Linux, "nginx-small", 1000.0, Some(200.0)),
        sample(Stack::Toe, "nginx-small", 500.0, Some(400.0)),
    ]);
    assert_eq!(r.cells.len(), 2);
    let toe = &r.cells[1];
    assert_eq!(toe.id, "nginx-small,toe");
    assert_eq!(toe.rate_vs_linux, Some(0.5));
    assert_eq!(toe.p99_vs_linux, Some(2.0));
    assert_eq!(toe.server_cpu_vs_linux, Some(2.0));
    assert_eq!(
        r.cells[0].rate_vs_linux, None,
        "Linux has no ratio to itself"
    );
    assert!(r.verified);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["experiment"], "apps");
    assert_eq!(json["params"]["engine"], serde_json::json!(["toe"]));
    assert_eq!(
        json["params"]["workload"],
        serde_json::json!(["nginx-small"])
    );
    // Unmeasured: null, never 0.
    assert!(json["cells"][1]["p999_us"].is_null());
    assert_eq!(json["cells"][1]["rate"]["mean"], 500.0);
    assert!(json["meta"]["kernel"].is_string());
}

#[test]
fn a_missing_percentile_or_stack_leaves_the_ratio_absent() {
    let r = result(vec![
        sample(Stack::Linux, "nginx-small", 1000.0, None),
        sample(Stack::Toe, "nginx-small", 500.0, Some(400.0)),
    ]);
    assert_eq!(r.cells[1].p99_vs_linux, None);
    let r = result(vec![sample(Stack::Toe, "nginx-small", 500.0, Some(400.0))]);
    assert_eq!(r.cells[0].samples, 0);
    assert_eq!(r.cells[1].rate_vs_linux, None);
    assert!(
        !r.cells[0].verified,
        "a cell without samples verified nothing"
    );
}

#[test]
fn one_wrong_content_spoils_the_run_and_its_cell() {
    let mut bad = sample(Stack::Toe, "nginx-small", 500.0, Some(400.0));
    bad.verification
        .record(Err("GET /large.bin: differs at 17".into()));
    let r = result(vec![sample(Stack::Linux, "nginx-small", 1000.0, None), bad]);
    assert!(!r.verified);
    assert!(!r.cells[1].verified && r.cells[0].verified);
    assert!(!AppsExperiment::succeeded(&r.output));
    let text = r.text().to_string();
    assert!(
        text.contains("first wrong content: GET /large.bin: differs at 17"),
        "{text}"
    );
    assert!(text.contains("WRONG"));
    assert!(!result(Vec::new()).verified, "nothing run is not verified");
}

#[test]
fn the_table_has_a_row_per_cell_and_stack_and_the_chart_a_bar_per_engine() {
    let mut toe = sample(Stack::Toe, "nginx-small", 500.0, Some(400.0));
    toe.server_errors = vec!["nginx exited during the run".into()];
    let r = result(vec![
        sample(Stack::Linux, "nginx-small", 1000.0, Some(200.0)),
        toe,
    ]);
    let text = r.text().to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("cell"), "{text}");
    assert!(lines[1].starts_with("nginx-small  linux"), "{text}");
    assert!(lines[2].contains(" 0.50 "), "{text}");
    assert!(text.contains("0 (+1 server)"), "{text}");
    assert!(text.contains("server errors, nginx-small,toe: nginx exited during the run"));
    let o = plot::outline(&r.svg().unwrap()).unwrap();
    assert_eq!(o.x_ticks, vec!["nginx-small"]);
    assert_eq!(o.bars, 2, "toe req/s and toe p99");
    let line = r.samples[1].progress_line();
    assert!(
        line.contains("nginx-small,toe: 500 req/s, p99 400 µs"),
        "{line}"
    );
}

#[test]
fn parameters_are_checked_and_quick_is_small() {
    assert!(AppsParams::default().check().is_ok());
    let q = AppsParams::default().quick();
    assert!(q.check().is_ok() && q.quick);
    assert_eq!(q.stacks().len(), 4, "the quick run still has every engine");
    let bad = |f: fn(&mut AppsParams)| {
        let mut p = AppsParams::default();
        f(&mut p);
        p.check().unwrap_err().to_string()
    };
    assert!(bad(|p| p.workload.clear()).contains("--workload"));
    assert!(bad(|p| p.seconds = 0.5).contains("--seconds"));
    assert!(bad(|p| p.seconds = f64::NAN).contains("--seconds"));
    assert!(bad(|p| p.repetitions = 0).contains("--repetitions"));
    assert!(bad(|p| p.connections = 2).contains("--connections"));
    assert!(bad(|p| p.client_cpus = vec![1]).contains("share a CPU"));
    assert!(bad(|p| p.server_cpus.clear()).contains("--server-cpus"));
    assert!(
        bad(|p| p.engines = Engines::of(&[EngineName::Toe, EngineName::Toe])).contains("each once")
    );
    assert!(bad(|p| p.workload = vec![Workload::Redis, Workload::Redis]).contains("each once"));
    // Linux always runs first.
    let p = AppsParams {
        engines: Engines::of(&[EngineName::Laminar]),
        ..AppsParams::default()
    };
    assert_eq!(p.stacks(), vec![Stack::Linux, Stack::Laminar]);
    assert_eq!(
        Workload::Redis.cells(),
        vec!["redis-get", "redis-set", "redis-lpush"]
    );
}

#[cfg(feature = "clap")]
#[test]
fn the_command_line_defaults_are_the_library_defaults() {
    assert!(crate::clap_defaults_are_the_library_defaults::<AppsParams>());
    let p: AppsParams =
        crate::parse_params(&["--workload", "memcached,redis-p16", "--server-cpus", "2,3"])
            .unwrap();
    assert_eq!(
        p.workload,
        vec![Workload::Memcached, Workload::RedisPipelined]
    );
    assert_eq!(p.server_cpus, vec![2, 3]);
    assert!(crate::parse_params::<AppsParams>(&["--workload", "apache"]).is_err());
}

/// A server side dropped without being stopped (a run that failed half
/// way) stops its data path: the next one takes the same device at once
/// (the old thread would hold its AF_XDP socket until the process ended).
#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): make test runs it as root"]
fn a_data_path_dropped_half_way_lets_the_device_go() {
    testkit::require_root("network namespaces, veths, XDP, AF_XDP");
    let mut spec = LabSpec::new(&lab::unique_name("appd"));
    spec.software_rss = false;
    spec.ipv6 = false;
    let lab = Lab::up(&spec).unwrap().teardown_on_drop();
    let params = AppsParams {
        server_cpus: vec![0],
        ..AppsParams::default()
    };
    let first = ServerSide::start(&lab, &params, Stack::Toe).unwrap();
    drop(first);
    let second = ServerSide::start(&lab, &params, Stack::Toe).unwrap();
    assert!(second.stop(&lab).unwrap().is_some());
}

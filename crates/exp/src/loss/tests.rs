//! Parameters, the grid, and the result's shape, without a lab.

use super::*;

/// A sample of the quick grid's first setting (0.1%, 2 ms, 1 Gbit/s), the
/// receive direction, with `goodput` and `retransmissions`.
pub(super) fn sample(stack: Stack, goodput: Option<f64>, retransmissions: Option<u64>) -> Sample {
    let setting = LossParams::default().quick().settings()[0];
    let t = Transfer {
        direction: Direction::Receive,
        cc: SenderCc::Reno,
        stack,
    };
    let mut s = sample_of(t, setting, goodput);
    s.retransmissions = retransmissions;
    s.retransmissions_per_drop = retransmissions.map(|r| r as f64 / s.wire_drops as f64);
    s
}

fn sample_of(t: Transfer, setting: Setting, goodput: Option<f64>) -> Sample {
    let wire = DirectionCounters {
        dropped_policy: 10,
        ..DirectionCounters::default()
    };
    let mut check = StreamCheck::default();
    check.take(&[pattern(0)]);
    let m = Measured {
        sent: 1,
        sender_done: true,
        check,
        retransmissions: Some(12),
        rtos: Some(1),
        fast_retransmits: Some(3),
        loss_probes: None,
        spurious: None,
        sender_cc: Some("reno".into()),
        endpoint: None,
        port_drops: None,
        laminar: None,
    };
    let mut s = super::sample(0, &setting, t, m, wire);
    s.goodput_mbit = goodput;
    s
}

/// The quick grid with every data path transfer at 100 Mbit/s and every
/// Linux one at 200.
pub(super) fn quick_result() -> LossResult {
    let p = LossParams::default().quick();
    let mut samples = Vec::new();
    for setting in p.settings() {
        for t in p.transfers() {
            let g = if t.stack == Stack::Linux {
                200.0
            } else {
                100.0
            };
            samples.push(sample_of(t, setting, Some(g)));
        }
    }
    let dctcp = DctcpSupport {
        available: Some(false),
        detail: "absent: test".into(),
    };
    Report::new(p.clone(), summarize(&p, samples, dctcp))
}

#[cfg(feature = "clap")]
#[test]
fn the_command_line_defaults_are_the_library_defaults_and_choose_subsets() {
    assert!(crate::clap_defaults_are_the_library_defaults::<LossParams>());
    let p: LossParams = crate::parse_params(&[
        "--loss",
        "1%,0.1",
        "--model",
        "bursty",
        "--rtt",
        "20",
        "--rate",
        "unlimited",
        "--engine",
        "laminar",
        "--direction",
        "send",
        "--cc",
        "bbr,cubic",
    ])
    .unwrap();
    assert_eq!(p.loss, vec![Percent(1.0), Percent(0.1)]);
    assert_eq!(p.model, vec![LossModel::Bursty]);
    assert_eq!(p.rate, vec![Rate(0)]);
    assert_eq!(p.engines.engine, vec![EngineName::Laminar]);
    assert_eq!(p.direction, vec![Direction::Send]);
    assert_eq!(p.cc, vec![SenderCc::Bbr, SenderCc::Cubic]);
    assert!(p.check().is_ok());
    for bad in [
        &["--engine", "dpdk"][..],
        &["--cc", "vegas"],
        &["--direction", "sideways"],
        &["--loss", "lots"],
        &["--rate", "fast"],
    ] {
        assert!(crate::parse_params::<LossParams>(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn bad_parameters_are_refused() {
    let ok = LossParams::default();
    assert!(ok.check().is_ok());
    assert!(ok.clone().quick().check().is_ok());
    for bad in [
        LossParams {
            loss: vec![Percent(150.0)],
            ..ok.clone()
        },
        LossParams {
            loss: vec![Percent(-1.0)],
            ..ok.clone()
        },
        LossParams {
            loss: vec![Percent(1.0), Percent(1.0)],
            ..ok.clone()
        },
        LossParams {
            rtt: vec![-2.0],
            ..ok.clone()
        },
        LossParams {
            rate: vec![Rate(1000)],
            ..ok.clone()
        },
        LossParams {
            engines: Engines::of(&[]),
            ..ok.clone()
        },
        LossParams {
            engines: Engines::of(&[EngineName::Toe, EngineName::Toe]),
            ..ok.clone()
        },
        LossParams {
            cc: vec![],
            ..ok.clone()
        },
        LossParams {
            seconds: 0.0,
            ..ok.clone()
        },
        LossParams {
            ooo_bound: toe::ooo::OooBound::Intervals(0),
            ..ok.clone()
        },
        LossParams {
            repetitions: 0,
            ..ok.clone()
        },
    ] {
        assert!(
            matches!(bad.check(), Err(ExpError::Parameter(_))),
            "{bad:?}"
        );
    }
    // The send direction alone needs no sender CC.
    let send = LossParams {
        direction: vec![Direction::Send],
        cc: vec![],
        ..ok
    };
    assert!(send.check().is_ok());
}

#[test]
fn values_parse_as_the_command_line_writes_them() {
    assert_eq!("0.1%".parse::<Percent>(), Ok(Percent(0.1)));
    assert_eq!("2".parse::<Percent>(), Ok(Percent(2.0)));
    assert!("x%".parse::<Percent>().is_err());
    assert_eq!("1gbit".parse::<Rate>(), Ok(Rate(1_000_000_000)));
    assert_eq!("unlimited".parse::<Rate>(), Ok(Rate(0)));
    assert_eq!(Rate(500_000_000).to_string(), "500mbit");
    assert_eq!(Rate(0).to_string(), "unlimited");
}

#[test]
fn the_full_grid_and_the_quick_one() {
    let full = LossParams::default();
    // 0 once, four rates with two models each.
    assert_eq!(full.loss_points().len(), 9);
    assert_eq!(full.settings().len(), 9 * 3 * 2);
    // Receive: 3 CCs x (Linux + 3 engines); send: Linux + 3 engines.
    assert_eq!(full.transfers().len(), 12 + 4);
    assert_eq!(
        full.linux_ccs(),
        vec![SenderCc::Reno, SenderCc::Cubic, SenderCc::Bbr]
    );
    let quick = full.quick();
    assert_eq!(quick.settings().len(), 2);
    let ids: Vec<String> = quick
        .transfers()
        .iter()
        .map(|t| cell_id(t.direction, t.cc, &quick.settings()[1], t.stack))
        .collect();
    assert_eq!(
        ids,
        [
            "receive,reno,1%,2ms,1gbit,linux",
            "receive,reno,1%,2ms,1gbit,toe",
            "send,reno,1%,2ms,1gbit,linux",
            "send,reno,1%,2ms,1gbit,toe",
        ]
    );
    // Send only: Linux's reference is reno.
    let send = LossParams {
        direction: vec![Direction::Send],
        cc: vec![SenderCc::Bbr],
        ..LossParams::default()
    };
    assert_eq!(send.linux_ccs(), vec![SenderCc::Reno]);
}

#[test]
fn bursty_loss_has_the_mean_rate_asked_for() {
    for q in [0.01, 0.1, 1.0, 2.0] {
        let point = LossPoint {
            percent: Percent(q),
            model: Some(LossModel::Bursty),
        };
        let loss = point.wire_loss();
        assert!((loss.mean_rate() - q / 100.0).abs() < 1e-12, "{loss:?}");
        assert!(matches!(loss, Loss::GilbertElliott { r, .. } if r == 0.25));
        assert_eq!(point.to_string(), format!("ge:{q}%"));
    }
    let none = LossPoint {
        percent: Percent(0.0),
        model: None,
    };
    assert_eq!(none.wire_loss(), Loss::None);
    assert_eq!(none.to_string(), "0%");
    // The loss is on the data direction only; the RTT is split.
    let s = Setting {
        loss: LossPoint {
            percent: Percent(1.0),
            model: Some(LossModel::Uniform),
        },
        rtt_ms: 2.0,
        rate: Rate(1_000_000_000),
    };
    let (data, acks) = s.impairments();
    assert_eq!(data.loss, Loss::Uniform { p: 0.01 });
    assert_eq!(acks.loss, Loss::None);
    assert_eq!(data.delay, Delay::Constant { ns: 1_000_000 });
    assert_eq!(
        (data.rate_bps, acks.rate_bps),
        (1_000_000_000, 1_000_000_000)
    );
}

#[test]
fn the_ratio_is_per_cell_and_what_was_not_measured_is_null() {
    let r = quick_result();
    assert!(r.byte_exact);
    assert_eq!(r.cells.len(), 4);
    let c = &r.cells[0];
    assert_eq!(c.id, "receive,reno,0.1%,2ms,1gbit,toe");
    assert_eq!(c.ratio, Some(0.5));
    assert_eq!(c.retransmissions_per_drop, Some(1.2));
    assert_eq!(c.rtos, Some(1));
    assert!(c.byte_exact);
    // A cell whose Linux sample has no goodput has no ratio, not 0.
    let p = LossParams::default().quick();
    let setting = p.settings()[0];
    let t = p.transfers()[1];
    let mine = sample(Stack::Toe, Some(100.0), None);
    let linux = sample(Stack::Linux, None, Some(5));
    let c = cell(t, setting, &[&mine], &[&linux]);
    assert_eq!((c.ratio, c.linux_goodput_mbit), (None, None));
    assert_eq!(c.retransmissions_per_drop, None);
    assert_eq!(c.linux_retransmissions_per_drop, Some(0.5));
    // No drop: retransmissions per drop is null, not infinite or 0.
    let mut m = sample(Stack::Toe, Some(1.0), Some(3));
    m.wire_drops = 0;
    let s = super::sample(
        0,
        &setting,
        t,
        Measured {
            sent: 0,
            sender_done: true,
            check: StreamCheck::default(),
            retransmissions: Some(3),
            rtos: None,
            fast_retransmits: None,
            loss_probes: None,
            spurious: None,
            sender_cc: None,
            endpoint: None,
            port_drops: None,
            laminar: None,
        },
        DirectionCounters::default(),
    );
    assert_eq!((s.retransmissions_per_drop, s.goodput_mbit), (None, None));
    // Nothing arrived: not byte-exact.
    assert!(!s.byte_exact);
}

#[test]
fn one_inexact_transfer_spoils_the_run_and_its_cell() {
    let mut r = quick_result();
    let p = r.params.clone();
    r.samples[3].byte_exact = false;
    let r = summarize(&p, r.output.samples, r.output.dctcp);
    assert!(!r.byte_exact);
    assert_eq!(
        r.cells.iter().filter(|c| !c.byte_exact).count(),
        1,
        "{:?}",
        r.cells
    );
}

#[test]
fn the_json_names_cells_for_the_matrix_and_carries_meta_and_samples() {
    let r = quick_result();
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["experiment"], "loss");
    assert_eq!(json["byte_exact"], true);
    assert_eq!(json["params"]["engine"], serde_json::json!(["toe"]));
    assert_eq!(json["params"]["rate"], serde_json::json!(["1gbit"]));
    assert_eq!(json["params"]["loss"], serde_json::json!([0.1, 1.0]));
    assert!(json["meta"]["kernel"].is_string());
    assert_eq!(json["params"]["ooo_bound"], "64");
    // Where the threads ran: named, or null where the host lacks the CPU.
    for role in ["linux_sender", "receiver", "data_path"] {
        let cpu = &json["pinned_cpus"][role];
        assert!(cpu.is_u64() || cpu.is_null(), "{role}: {cpu}");
    }
    assert_eq!(json["samples"].as_array().unwrap().len(), 8);
    let cell = json["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "send,reno,1%,2ms,1gbit,toe")
        .unwrap();
    assert_eq!(cell["ratio"], 0.5);
    assert_eq!(cell["engine"], "toe");
    assert_eq!(cell["rtt_ms"], 2.0);
    assert_eq!(cell["loss"]["model"], "uniform");
    assert_eq!(cell["goodput_mbit"]["mean"], 100.0);
    // Unmeasured values are null in the JSON, never 0.
    assert!(cell["spurious_retransmissions"].is_null());
    assert_eq!(json["dctcp"]["available"], false);
    let svg = svg(&r);
    assert!(svg.starts_with("<svg"));
    assert!(svg.contains("receive reno: toe") && svg.contains("send reno: linux"));
}

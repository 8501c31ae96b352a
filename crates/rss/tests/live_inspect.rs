//! Integration tests of `rss::live` against the running kernel.
//!
//! Tests that need root (a fresh network namespace with a veth pair) are
//! marked `#[ignore]` with the reason: unprivileged `cargo test` reports them as
//! ignored; `make test` (as root) runs them with `--include-ignored`.

#![cfg(feature = "live")]

use rss::live::{inspect, read_config, LiveError};

testkit::strict_mode_guard!();

fn show(report: &rss::live::DeviceReport) {
    println!("{}", serde_json::to_string_pretty(report).unwrap());
}

#[test]
fn loopback_has_no_rss_and_no_panic() {
    let report = inspect("lo").expect("inspect lo");
    show(&report);
    assert_eq!(report.dev, "lo");
    assert_eq!(report.ifindex, 1);
    assert!(report.rss.is_none());
    assert!(
        report.lacks.iter().any(|l| l.starts_with("no RSS")),
        "{:?}",
        report.lacks
    );
    let err = read_config("lo").unwrap_err();
    assert!(matches!(err, LiveError::NoRss { .. }), "{err}");
    assert!(err.is_environment());
}

/// The device of the IPv4 default route (`/proc/net/route`, destination
/// 00000000): the machine's uplink, whatever its name. A machine without
/// one fails the tests that inspect it.
fn uplink() -> String {
    let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    routes
        .lines()
        .skip(1)
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(1) == Some(&"00000000")).then(|| fields[0].to_string())
        })
        .unwrap_or_else(|| {
            testkit::missing("a network device with an IPv4 default route (/proc/net/route)")
        })
}

#[test]
fn uplink_states_its_rss_or_why_not() {
    let dev = uplink();
    let report = inspect(&dev).unwrap_or_else(|e| panic!("inspect {dev}: {e}"));
    show(&report);
    match &report.rss {
        Some(config) => {
            config.validate().unwrap();
            assert!(report.source.is_some());
        }
        None => assert!(!report.lacks.is_empty(), "no RSS and no statement why"),
    }
    if report.driver.as_deref() == Some("virtio_net")
        && report.channels.is_some_and(|c| c.rx_queues() == 1)
    {
        // A single-queue virtio_net (a common VM NIC): no RSS, one IRQ for queue 0.
        assert!(report.rss.is_none(), "{:?}", report.rss);
        assert!(report.lacks[0].contains("virtio_net"), "{:?}", report.lacks);
        assert_eq!(report.queue_irqs.len(), 1, "{:?}", report.queue_irqs);
        assert_eq!(report.queue_irqs[0].queue, 0);
    }
}

#[test]
fn missing_device_is_bad_input() {
    let err = inspect("steer-nosuch0").unwrap_err();
    assert!(
        matches!(err, LiveError::NoSuchDevice { ref dev } if dev == "steer-nosuch0"),
        "{err}"
    );
    assert!(err.is_bad_input() && !err.is_environment());
    let err = inspect("bad/name").unwrap_err();
    assert!(err.is_bad_input(), "{err}");
}

#[test]
fn inspect_in_reads_every_device_or_names_what_is_missing() {
    let all = rss::live::inspect_in(None, None).expect("inspect every device");
    assert!(all.iter().any(|r| r.dev == "lo"), "no lo in {all:?}");
    let lo = rss::live::inspect_in(None, Some("lo")).expect("inspect lo");
    assert_eq!(lo.len(), 1);
    assert_eq!(lo[0].dev, "lo");
    let err = rss::live::inspect_in(None, Some("steer-nosuch0")).unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    let err = rss::live::inspect_in(Some("steer-no-such-netns"), None).unwrap_err();
    assert!(matches!(err, LiveError::Namespace(_)), "{err}");
    assert!(err.is_bad_input() && !err.is_environment(), "{err}");
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn veth_in_fresh_namespace_states_no_rss() {
    testkit::require_root("creates a network namespace and a veth pair");
    let ns = testkit::Netns::new("steer-livetest");
    host::link::add_veth("sveth0", ns.name(), "sveth1", ns.name()).expect("create veth");
    host::link::set_up(ns.name(), "sveth0").unwrap();
    let (report, err) = host::netns::run_in(Some(ns.name()), || {
        (inspect("sveth0"), read_config("sveth1"))
    })
    .expect("enter namespace");
    let report = report.expect("inspect veth");
    show(&report);
    assert_eq!(report.driver.as_deref(), Some("veth"));
    assert!(report.rss.is_none());
    assert!(
        report
            .lacks
            .iter()
            .any(|l| l == "no RSS: the driver (veth) implements no RSS hash or indirection table"),
        "{:?}",
        report.lacks
    );
    let channels = report.channels.expect("veth has a channel API");
    assert!(channels.rx_queues() >= 1, "{channels:?}");
    assert!(report.queue_irqs.is_empty());
    let err = err.unwrap_err();
    assert!(
        matches!(err, LiveError::NoRss { .. }) && err.is_environment(),
        "{err}"
    );
    // Every device of the namespace, read from outside it.
    let mut names: Vec<String> = rss::live::inspect_in(Some(ns.name()), None)
        .expect("inspect the namespace's devices")
        .into_iter()
        .map(|r| r.dev)
        .collect();
    names.sort();
    assert_eq!(names, ["lo", "sveth0", "sveth1"]);
    // The namespace's own sysfs: its RPS masks are read, as set.
    let sysfs = host::sysfs::Sysfs::of(ns.name()).unwrap();
    sysfs
        .write("class/net/sveth1/queues/rx-0/rps_cpus", "1")
        .unwrap();
    let one = rss::live::inspect_in(Some(ns.name()), Some("sveth1")).expect("inspect sveth1");
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].driver.as_deref(), Some("veth"));
    assert_eq!(one[0].rps_cpus.first(), Some(&vec![0]), "{:?}", one[0]);
    assert!(
        !one[0].notes.iter().any(|n| n.contains("were not read")),
        "{:?}",
        one[0].notes
    );
    // The device is not visible outside the namespace.
    assert!(matches!(
        inspect("sveth0"),
        Err(LiveError::NoSuchDevice { .. })
    ));
}

/// The ioctl path alone (what a kernel without ETHTOOL_MSG_RSS_GET gets).
#[test]
fn ioctl_fallback_agrees_with_netlink() {
    use rss::live::{inspect_with, InspectOptions};
    let ioctl_only = InspectOptions {
        netlink: false,
        ..InspectOptions::default()
    };
    for dev in ["lo".to_string(), uplink()] {
        let dev = dev.as_str();
        let via_nl = inspect(dev).unwrap_or_else(|e| panic!("{dev}: {e}"));
        let via_ioctl = inspect_with(dev, &ioctl_only).expect(dev);
        show(&via_ioctl);
        assert_eq!(via_ioctl.rss, via_nl.rss, "{dev}");
        let rss_lacks = |r: &rss::live::DeviceReport| -> Vec<String> {
            r.lacks
                .iter()
                .filter(|l| l.contains("RSS"))
                .cloned()
                .collect()
        };
        assert_eq!(rss_lacks(&via_ioctl), rss_lacks(&via_nl), "{dev}");
        if via_nl.source.is_some() {
            assert_eq!(via_ioctl.source.as_deref(), Some("ioctl"), "{dev}");
        }
    }
}

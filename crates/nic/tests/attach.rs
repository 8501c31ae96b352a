//! The loader against a real kernel (root only): bad input changes nothing,
//! the checksum pitfall is reported, attach/update/detach work from separate
//! calls, and a foreign XDP program is not replaced.
//!
//! Each test makes its own namespace pair (`nt-a-<pid>-<n>`, `nt-b-...`)
//! joined by a veth, removed by a Drop guard.

use nic::{AttachOptions, NicError};
use rss::{IndirectionTable, RssConfig, RssKey};

testkit::strict_mode_guard!();

/// Two namespaces joined by veth0 <-> veth0; `b` is where XDP goes.
struct Pair {
    a: testkit::Netns,
    b: testkit::Netns,
}

impl Pair {
    fn new(tx_checksum_off: bool) -> Pair {
        let pair = Pair {
            a: testkit::Netns::new("nt-a"),
            b: testkit::Netns::new("nt-b"),
        };
        for ns in [pair.a.name(), pair.b.name()] {
            // No IPv6 on the new veths: their router solicitations and MLD
            // reports would arrive at any moment and land in the flow table
            // that `attach_update_detach_across_calls` expects to be empty.
            for conf in ["all", "default"] {
                let key = format!("net.ipv6.conf.{conf}.disable_ipv6");
                host::netns::set_sysctl(ns, &key, "1").unwrap();
            }
        }
        host::link::add_veth("veth0", pair.a.name(), "veth0", pair.b.name()).unwrap();
        host::link::set_up(pair.a.name(), "veth0").unwrap();
        host::link::set_up(pair.b.name(), "veth0").unwrap();
        if tx_checksum_off {
            host::link::set_tx_checksum(Some(pair.a.name()), "veth0", false).unwrap();
        }
        pair
    }

    fn b(&self) -> Option<&str> {
        Some(self.b.name())
    }

    /// The XDP program id on b's veth0 (0: none).
    fn xdp_prog(&self) -> u64 {
        let out = host::command::ip(&["-n", self.b.name(), "-j", "link", "show", "dev", "veth0"])
            .unwrap_or_else(|e| panic!("{e}"));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v[0]["xdp"]["prog"]["id"].as_u64().unwrap_or(0)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = nic::detach("veth0", self.b());
    }
}

fn config(queues: u32) -> RssConfig {
    let cpus = libbpf_rs::num_possible_cpus().unwrap() as u32;
    let mut c =
        RssConfig::ethtool_default(RssKey::new((1..=52).collect()).unwrap(), queues, 128).unwrap();
    c.queue_cpus = (0..queues).map(|q| q % cpus).collect();
    c
}

fn nothing_left(pair: &Pair) {
    assert_eq!(pair.xdp_prog(), 0, "an XDP program is attached");
    assert!(!nic::state::pin_dir("veth0", pair.b()).exists());
    assert!(!nic::state::config_path("veth0", pair.b()).exists());
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn nonexistent_device_is_no_such_device_and_pins_nothing() {
    testkit::require_root("network namespaces, XDP");
    let pair = Pair::new(true);
    let err = nic::attach("nosuch0", pair.b(), &config(4), &AttachOptions::default()).unwrap_err();
    assert!(matches!(err, NicError::NoSuchDevice { .. }), "{err}");
    assert!(!err.is_environment());
    assert!(!nic::state::pin_dir("nosuch0", pair.b()).exists());
    let err = nic::attach(
        "veth0",
        Some("no-such-ns"),
        &config(4),
        &AttachOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, NicError::NoSuchNetns { .. }), "{err}");
    nothing_left(&pair);
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn bad_configs_are_rejected_before_attach() {
    testkit::require_root("network namespaces, XDP");
    let pair = Pair::new(true);
    let mut c = config(4);
    c.indirection_table = IndirectionTable::from_entries(vec![0, 1, 2, 3, 4]).unwrap();
    let err = nic::attach("veth0", pair.b(), &c, &AttachOptions::default()).unwrap_err();
    assert!(matches!(err, NicError::InvalidConfig(_)), "{err}");
    assert!(!err.is_environment());
    nothing_left(&pair);

    let mut c = config(4);
    c.key = RssKey::new(vec![1; 16]).unwrap();
    let err = nic::attach("veth0", pair.b(), &c, &AttachOptions::default()).unwrap_err();
    assert!(matches!(err, NicError::UnsupportedConfig { .. }), "{err}");
    let opts = AttachOptions {
        queue_size: 0,
        ..AttachOptions::default()
    };
    assert!(nic::attach("veth0", pair.b(), &config(4), &opts).is_err());
    nothing_left(&pair);

    // An update with a bad config leaves the running one untouched.
    nic::attach("veth0", pair.b(), &config(4), &AttachOptions::default()).unwrap();
    let mut c = config(4);
    c.queues = 2;
    c.queue_cpus.truncate(2);
    assert!(nic::update("veth0", pair.b(), &c).is_err());
    assert_eq!(
        nic::attached_config("veth0", pair.b()).unwrap(),
        Some(config(4))
    );
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn peer_with_tx_checksum_offload_is_reported_with_the_fix() {
    testkit::require_root("network namespaces, XDP");
    let pair = Pair::new(false);
    let err = nic::attach("veth0", pair.b(), &config(2), &AttachOptions::default()).unwrap_err();
    match &err {
        NicError::PeerChecksumOffload {
            peer_netns, fix, ..
        } => {
            assert_eq!(peer_netns.as_deref(), Some(pair.a.name()));
            assert!(fix.contains("ethtool -K veth0 tx off"), "{fix}");
        }
        other => panic!("expected PeerChecksumOffload, got {other}"),
    }
    nothing_left(&pair);
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn attach_update_detach_across_calls() {
    testkit::require_root("network namespaces, XDP");
    let pair = Pair::new(true);
    assert_eq!(nic::attached_config("veth0", pair.b()).unwrap(), None);
    assert!(matches!(
        nic::stats("veth0", pair.b()),
        Err(NicError::NotAttached { .. })
    ));
    nic::attach("veth0", pair.b(), &config(4), &AttachOptions::default()).unwrap();
    let first = pair.xdp_prog();
    assert_ne!(first, 0);
    assert_eq!(
        nic::attached_config("veth0", pair.b()).unwrap(),
        Some(config(4))
    );
    let stats = nic::stats("veth0", pair.b()).unwrap();
    assert_eq!(stats.queues.len(), 4);
    assert!(matches!(
        nic::flows("veth0", pair.b()),
        Err(NicError::FlowsNotTracked { .. })
    ));

    // Re-attach replaces Steer's own program.
    let opts = AttachOptions {
        track_flows: true,
        ..AttachOptions::default()
    };
    nic::attach("veth0", pair.b(), &config(8), &opts).unwrap();
    assert_ne!(pair.xdp_prog(), first);
    assert_eq!(nic::stats("veth0", pair.b()).unwrap().queues.len(), 8);
    assert!(nic::flows("veth0", pair.b()).unwrap().is_empty());
    nic::clear_flows("veth0", pair.b()).unwrap();

    let mut c = config(8);
    c.key = RssKey::microsoft();
    nic::update("veth0", pair.b(), &c).unwrap();
    assert_eq!(nic::attached_config("veth0", pair.b()).unwrap(), Some(c));
    nic::reset_stats("veth0", pair.b()).unwrap();

    nic::detach("veth0", pair.b()).unwrap();
    nothing_left(&pair);
    let err = nic::detach("veth0", pair.b()).unwrap_err();
    assert!(matches!(err, NicError::NotAttached { .. }), "{err}");
    assert!(matches!(
        nic::update("veth0", pair.b(), &config(4)),
        Err(NicError::NotAttached { .. })
    ));
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn a_foreign_xdp_program_is_not_replaced() {
    testkit::require_root("network namespaces, XDP");
    let pair = Pair::new(true);
    nic::attach("veth0", pair.b(), &config(2), &AttachOptions::default()).unwrap();
    let id = pair.xdp_prog();
    // Forget the pins: the running program now looks like someone else's.
    std::fs::remove_dir_all(nic::state::pin_dir("veth0", pair.b())).unwrap();
    let err = nic::attach("veth0", pair.b(), &config(2), &AttachOptions::default()).unwrap_err();
    assert!(matches!(err, NicError::ForeignProgram { .. }), "{err}");
    assert_eq!(pair.xdp_prog(), id);
    assert!(matches!(
        nic::detach("veth0", pair.b()),
        Err(NicError::NotAttached { .. })
    ));
    host::command::ip(&["-n", pair.b.name(), "link", "set", "veth0", "xdp", "off"]).unwrap();
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn device_config_is_the_software_rss_and_never_the_nics_in_its_place() {
    testkit::require_root("network namespaces, XDP");
    let pair = Pair::new(true);
    // Nothing attached: the NIC's own RSS is asked, and a veth has none.
    let err = nic::device_config("veth0", pair.b()).unwrap_err();
    assert!(matches!(err, NicError::NicRss(_)), "{err}");
    nic::attach("veth0", pair.b(), &config(4), &AttachOptions::default()).unwrap();
    let (source, found) = nic::device_config("veth0", pair.b()).unwrap();
    assert_eq!((source, found), (nic::ConfigSource::SoftwareRss, config(4)));
    // Attached but its state unreadable: an error, not the NIC's config.
    let path = nic::state::config_path("veth0", pair.b());
    std::fs::write(&path, "not json").unwrap();
    let err = nic::device_config("veth0", pair.b()).unwrap_err();
    assert!(matches!(err, NicError::State { .. }), "{err}");
    nic::detach("veth0", pair.b()).unwrap();
    nothing_left(&pair);
}

//! As root, in the namespace lab: the agent runs in the receiver's namespace
//! and serves the software RSS config of the receiver's veth on the lab
//! address; a client in the sender's namespace fetches it, and a key change
//! made with `nic::update` is served with a new config_version.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use agent::{Agent, AgentClient, ConfigOrigin, Devices, ServerOptions, Sources, Token};
use lab::{unique_name, Lab, LabSpec};
use rss::RssKey;

testkit::strict_mode_guard!();

const TOKEN: &str = "lab-token-1234";

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn serves_software_rss_across_the_lab() {
    testkit::require_root("network namespaces, veths, XDP");
    let lab = Lab::up(&LabSpec::new(&unique_name("ag")))
        .unwrap()
        .teardown_on_drop();
    let (snd, rcv) = (lab.sender().clone(), lab.receiver().clone());
    let rcv_ip = IpAddr::V4(rcv.ipv4);

    let mut opts = ServerOptions::new(Sources {
        devices: Devices::Listed(vec![rcv.dev.clone()]),
        files: vec![],
        netns: Some(rcv.netns.clone()),
    });
    opts.listen = SocketAddr::new(rcv_ip, 0);
    opts.token = Some(Token::new(TOKEN).unwrap());
    opts.config_interval = Duration::from_millis(100);
    let agent = Agent::start(opts).unwrap();
    let url = agent.url();

    // From the sender's namespace, over the lab veth.
    let ask = {
        let url = url.clone();
        let netns = snd.netns.clone();
        move || {
            let url = url.clone();
            host::netns::run_in(Some(&netns), move || {
                let c = AgentClient::new(&url, Some(TOKEN), Duration::from_secs(2)).unwrap();
                (c.rss(rcv_ip), c.check_path(0), c.load())
            })
            .unwrap()
        }
    };
    let (reply, path, load) = ask();
    let reply = reply.unwrap();
    assert_eq!(reply.config, lab.rss_config().unwrap());
    assert_eq!(reply.origin, ConfigOrigin::SoftwareRss);
    assert_eq!(reply.dev.as_deref(), Some(rcv.dev.as_str()));
    assert_eq!(reply.config_version, 1);
    let path = path.unwrap();
    assert_eq!(path.seen_addr, IpAddr::V4(snd.ipv4));
    assert!(!path.nat && !path.port_rewritten);
    let load = load.unwrap();
    let queues = &load
        .devices
        .iter()
        .find(|d| d.dev == rcv.dev)
        .expect("per-queue counters of the software RSS")
        .queues;
    assert_eq!(queues.len(), 4);

    // A new key, applied to the running datapath.
    let mut changed = lab.rss_config().unwrap();
    changed.key = RssKey::symmetric(40);
    nic::update(&rcv.dev, Some(&rcv.netns), &changed).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let reply = loop {
        let reply = ask().0.unwrap();
        if reply.config_version == 2 {
            break reply;
        }
        assert!(Instant::now() < deadline, "the new key was not noticed");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(reply.config, changed);
    assert_eq!(reply.config, lab.rss_config().unwrap());

    // Without the token, from the sender: refused.
    let refused = host::netns::run_in(Some(&snd.netns), move || {
        AgentClient::new(&url, None, Duration::from_secs(2))
            .unwrap()
            .rss(rcv_ip)
    })
    .unwrap();
    assert!(matches!(
        refused,
        Err(agent::ClientError::Unauthorized { .. })
    ));
    agent.shutdown();
}

//! The central claim of Steer, proved with counters: for every flow, the queue
//! `rss::Predictor` computes from the device's RssConfig is the queue the XDP
//! software RSS counts its packets in.
//!
//! A fresh lab (quiet link: IPv6 disabled, so no ND/MLD frames) gets software
//! RSS with 8 queues, a random 52-byte key, a `weight` table and UDP hashing
//! the 4-tuple. A few hundred random flows (IPv4 and IPv6, TCP and UDP, 1-6
//! packets each) are injected from the sender as raw Ethernet frames; the
//! per-queue counter deltas must equal the predicted per-queue packet counts
//! exactly, and each flow must be in the flow table under its predicted queue.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use lab::{inject, packet, unique_name, Lab, LabGuard, LabSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rss::{FlowTuple, HashFieldsByFlow, IndirectionTable, L4Proto, Predictor, RssKey};

testkit::strict_mode_guard!();

fn random_flows(rng: &mut StdRng, n: usize) -> Vec<(FlowTuple, u64)> {
    (0..n)
        .map(|_| {
            let (src, dst): (IpAddr, IpAddr) = if rng.gen_bool(0.5) {
                (
                    Ipv4Addr::from(rng.gen::<u32>()).into(),
                    Ipv4Addr::from(rng.gen::<u32>()).into(),
                )
            } else {
                (
                    Ipv6Addr::from(rng.gen::<u128>()).into(),
                    Ipv6Addr::from(rng.gen::<u128>()).into(),
                )
            };
            let proto = if rng.gen_bool(0.5) {
                L4Proto::Tcp
            } else {
                L4Proto::Udp
            };
            let tuple = FlowTuple::new(src, rng.gen(), dst, rng.gen(), proto);
            (tuple, rng.gen_range(1..=6))
        })
        .collect()
}

/// Packets per queue.
fn queue_packets(lab: &Lab) -> Vec<u64> {
    let r = lab.receiver();
    nic::stats(&r.dev, Some(&r.netns))
        .unwrap()
        .queues
        .iter()
        .map(|q| q.packets)
        .collect()
}

/// Injects the flows' packets (interleaved) and returns the per-queue
/// counter deltas.
fn inject_and_count(lab: &Lab, flows: &[(FlowTuple, u64)], rng: &mut StdRng) -> Vec<u64> {
    let (snd, rcv) = (lab.sender(), lab.receiver());
    let src_mac = inject::mac_address(&snd.netns, &snd.dev).unwrap();
    let dst_mac = inject::mac_address(&rcv.netns, &rcv.dev).unwrap();
    let mut frames = Vec::new();
    for (tuple, packets) in flows {
        for _ in 0..*packets {
            let payload = rng.gen_range(0..200);
            frames.push(packet::frame(tuple, src_mac, dst_mac, payload).unwrap());
        }
    }
    // Interleave flows, as real traffic would.
    for i in (1..frames.len()).rev() {
        frames.swap(i, rng.gen_range(0..=i));
    }
    let before = queue_packets(lab);
    let sent = inject::send_frames(&snd.netns, &snd.dev, frames).unwrap();
    assert_eq!(sent as u64, flows.iter().map(|f| f.1).sum::<u64>());
    // XDP runs in the veth's NAPI poll; give the last burst time to be counted.
    std::thread::sleep(Duration::from_millis(300));
    let after = queue_packets(lab);
    after.iter().zip(&before).map(|(a, b)| a - b).collect()
}

fn predicted(predictor: &Predictor, flows: &[(FlowTuple, u64)], queues: usize) -> Vec<u64> {
    let mut expected = vec![0u64; queues];
    for (tuple, packets) in flows {
        expected[predictor.place(tuple).unwrap().queue as usize] += packets;
    }
    expected
}

fn spec(name: &str) -> LabSpec {
    let mut spec = LabSpec::new(name);
    spec.queues = 8;
    spec.table = Some(IndirectionTable::weighted(128, &[1, 2, 3, 1, 2, 1, 3, 3], 0).unwrap());
    spec.fields = Some(HashFieldsByFlow::all_four_tuple());
    spec.ipv6 = false;
    spec.track_flows = true;
    spec
}

/// A fresh lab of [`spec`] named after `prefix` (root needed), and a random
/// generator whose seed is printed so a failure can be replayed.
fn seeded_lab(prefix: &str) -> (LabGuard, StdRng) {
    testkit::require_root("network namespaces, veths, XDP");
    let seed: u64 = rand::random();
    eprintln!("seed {seed}");
    let lab = Lab::up(&spec(&unique_name(prefix)))
        .unwrap()
        .teardown_on_drop();
    (lab, StdRng::seed_from_u64(seed))
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn per_queue_counters_equal_the_prediction() {
    let (lab, mut rng) = seeded_lab("pd");
    let config = lab.rss_config().unwrap();
    assert_eq!(config.key.len(), 52);
    let predictor = Predictor::new(config).unwrap();

    let flows = random_flows(&mut rng, 400);
    let expected = predicted(&predictor, &flows, 8);
    let counted = inject_and_count(&lab, &flows, &mut rng);
    assert_eq!(
        counted, expected,
        "per-queue packets: datapath vs prediction"
    );
    assert!(
        expected.iter().filter(|&&n| n > 0).count() >= 6,
        "{expected:?}"
    );

    // Flow by flow, from the datapath's flow table.
    let r = lab.receiver();
    let seen: HashMap<FlowTuple, nic::FlowStats> = nic::flows(&r.dev, Some(&r.netns))
        .unwrap()
        .into_iter()
        .map(|f| (f.tuple, f))
        .collect();
    for (tuple, packets) in &flows {
        let f = seen
            .get(tuple)
            .unwrap_or_else(|| panic!("flow {tuple:?} not in the datapath's table"));
        assert_eq!(f.queue, predictor.place(tuple).unwrap().queue, "{tuple:?}");
        assert_eq!(f.packets, *packets, "{tuple:?}");
    }
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn update_with_a_new_key_moves_flows_live() {
    let (lab, mut rng) = seeded_lab("pu");
    let r = lab.receiver().clone();
    let old = Predictor::new(lab.rss_config().unwrap()).unwrap();
    let flows = random_flows(&mut rng, 200);
    assert_eq!(
        inject_and_count(&lab, &flows, &mut rng),
        predicted(&old, &flows, 8)
    );

    let mut config = lab.rss_config().unwrap();
    config.key = RssKey::new((0..52).map(|_| rng.gen()).collect()).unwrap();
    nic::update(&r.dev, Some(&r.netns), &config).unwrap();
    assert_eq!(lab.rss_config().unwrap(), config);
    let new = Predictor::new(config).unwrap();
    let moved = flows
        .iter()
        .filter(|(t, _)| old.place(t).unwrap().queue != new.place(t).unwrap().queue)
        .count();
    assert!(moved > 50, "only {moved} of 200 flows change queue");
    assert_eq!(
        inject_and_count(&lab, &flows, &mut rng),
        predicted(&new, &flows, 8),
        "after update, per-queue packets follow the new key"
    );
}

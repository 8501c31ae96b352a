//! Both binders on a real datapath: in a lab whose receiver runs the XDP
//! software RSS (8 queues, a random key, per-flow counters), `iperf3 -P 8`
//! and 8 separate client processes are run through each binder; the
//! receiver's flow table must show every data flow on the queue its port
//! was planned for, and the 8 flows on 8 different queues.

mod common;

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use binder::{CgroupBinder, Plan, TempCgroup};
use common::{probe_command, Allocator, Answer};
use lab::{unique_name, Lab, LabGuard, LabSpec};

testkit::strict_mode_guard!();

const IPERF_PORT: u16 = 5201;
const SINK_PORT: u16 = 6000;
const FLOWS: usize = 8;

/// The two labs run one after the other: on a 2-core machine, one lab's
/// iperf3 traffic can starve the other's allocator past the shim's 200 ms
/// timeout, and the shim then (correctly) falls back to a kernel port.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn probe() {
    common::probe_child();
}

fn spec(name: &str) -> LabSpec {
    let mut spec = LabSpec::new(name);
    spec.queues = 8;
    spec.ipv6 = false;
    spec.track_flows = true;
    spec
}

fn plans(lab: &Lab) -> (Plan, Plan) {
    let config = lab.rss_config().unwrap();
    let (snd, rcv) = (lab.sender().ipv4.into(), lab.receiver().ipv4.into());
    // The default port range from a random offset, so a second run does not
    // meet the first one's TIME_WAIT sockets; both plans share the seed, so
    // slot i is on the same queue for both ports.
    let options = srap::PlanOptions {
        seed: Some(rand::random()),
        ..srap::PlanOptions::default()
    };
    let plan = |port| {
        srap::plan_from_config(&config, snd, rcv, port, rss::L4Proto::Tcp, 64, &options).unwrap()
    };
    (plan(IPERF_PORT), plan(SINK_PORT))
}

/// A fresh lab, torn down on drop, and its plans for the iperf3 and the
/// sink port.
fn lab_with_plans(prefix: &str) -> (LabGuard, Plan, Plan) {
    let lab = Lab::up(&spec(&unique_name(prefix)))
        .unwrap()
        .teardown_on_drop();
    let (p_iperf, p_sink) = plans(&lab);
    (lab, p_iperf, p_sink)
}

/// A server in the receiver's namespace that accepts and drains.
fn sink(lab: &Lab) {
    let addr = SocketAddr::new(lab.receiver().ipv4.into(), SINK_PORT);
    let (tx, rx) = std::sync::mpsc::channel();
    host::netns::spawn_in(&lab.receiver().netns, move || {
        let l = TcpListener::bind(addr).unwrap();
        tx.send(()).unwrap();
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut c = c;
                let _ = std::io::copy(&mut c, &mut std::io::sink());
            });
        }
    })
    .unwrap();
    rx.recv().unwrap();
}

fn iperf_server(lab: &Lab) -> Child {
    let child = lab
        .command("rcv", "iperf3")
        .unwrap()
        .args(["-s", "-1", "-p", &IPERF_PORT.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    child
}

fn iperf_client(lab: &Lab) -> Command {
    let mut cmd = Command::new("iperf3");
    cmd.args([
        "-c",
        &lab.receiver().ipv4.to_string(),
        "-p",
        &IPERF_PORT.to_string(),
        "-P",
        &FLOWS.to_string(),
        "-t",
        "2",
    ])
    .stdout(Stdio::null());
    host::netns::enter_in_child(&mut cmd, &lab.sender().netns).unwrap();
    cmd
}

fn stream_client(lab: &Lab) -> Command {
    let target = SocketAddr::new(lab.receiver().ipv4.into(), SINK_PORT);
    let mut cmd = probe_command("stream", &[target.to_string(), "1500".into()]);
    cmd.stdout(Stdio::piped());
    host::netns::enter_in_child(&mut cmd, &lab.sender().netns).unwrap();
    cmd
}

/// The `n` biggest flows from the sender to `port`, as the datapath saw them.
fn data_flows(lab: &Lab, port: u16, n: usize) -> Vec<nic::FlowStats> {
    let r = lab.receiver();
    let snd: IpAddr = lab.sender().ipv4.into();
    let mut flows: Vec<nic::FlowStats> = nic::flows(&r.dev, Some(&r.netns))
        .unwrap()
        .into_iter()
        .filter(|f| f.tuple.src == snd && f.tuple.dst_port == port)
        .collect();
    flows.sort_by_key(|f| std::cmp::Reverse(f.bytes));
    flows.truncate(n);
    flows
}

/// Every flow is on the queue planned for its port, and on its own queue.
fn check_as_planned(flows: &[nic::FlowStats], plan: &Plan, what: &str) {
    assert_eq!(flows.len(), FLOWS, "{what}: flows seen {flows:?}");
    let mut queues = BTreeSet::new();
    for f in flows {
        let entry = plan
            .entries
            .iter()
            .find(|e| e.port == f.tuple.src_port)
            .unwrap_or_else(|| panic!("{what}: port {} is not planned", f.tuple.src_port));
        assert_eq!(
            f.queue, entry.queue,
            "{what}: port {} planned for queue {}, datapath put it on {}",
            f.tuple.src_port, entry.queue, f.queue
        );
        queues.insert(f.queue);
    }
    assert_eq!(queues.len(), FLOWS, "{what}: queues {queues:?}");
    eprintln!("{what}: {FLOWS} flows on queues {queues:?}, as planned");
}

fn run_streams(lab: &Lab, configure: impl Fn(&mut Command)) {
    let children: Vec<Child> = (0..FLOWS)
        .map(|_| {
            let mut cmd = stream_client(lab);
            configure(&mut cmd);
            cmd.spawn().unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
}

/// `iperf3 -P 8` from the sender, through the binder `configure` sets up,
/// to the receiver's iperf3 server: every data flow where `plan` put it.
fn iperf_as_planned(lab: &Lab, plan: &Plan, what: &str, configure: impl FnOnce(&mut Command)) {
    let mut server = iperf_server(lab);
    let mut cmd = iperf_client(lab);
    configure(&mut cmd);
    assert!(cmd.status().unwrap().success());
    let _ = server.wait();
    check_as_planned(&data_flows(lab, IPERF_PORT, FLOWS), plan, what);
}

/// 8 separate client processes, through the binder `configure` sets up, to
/// the receiver's sink: every flow where `plan` put it.
fn streams_as_planned(lab: &Lab, plan: &Plan, what: &str, configure: impl Fn(&mut Command)) {
    sink(lab);
    run_streams(lab, configure);
    check_as_planned(&data_flows(lab, SINK_PORT, FLOWS), plan, what);
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn preload_steers_iperf3_and_separate_processes() {
    testkit::require_root("network namespaces, XDP");
    testkit::require_program("iperf3", "`make deps` installs it");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (lab, p_iperf, p_sink) = lab_with_plans("bpre");
    let ports = |p: &Plan| p.entries.iter().map(|e| e.port).collect::<Vec<_>>();
    let alloc = Allocator::start(Answer::Plans(vec![
        (IPERF_PORT, ports(&p_iperf)),
        (SINK_PORT, ports(&p_sink)),
    ]));
    let shim = binder::preload::install_shim().unwrap();

    iperf_as_planned(&lab, &p_iperf, "preload iperf3 -P 8", |cmd| {
        binder::preload::configure(cmd, &shim, Some(&alloc.path));
        cmd.env(binder::preload::DEBUG_ENV, "1");
    });
    streams_as_planned(&lab, &p_sink, "preload 8 processes", |cmd| {
        binder::preload::configure(cmd, &shim, Some(&alloc.path))
    });
    // iperf3 connects 9 times to one destination: the shim's requests grow
    // (1, 1, 2, 4, 8 ports) and spares serve the rest; each separate
    // process connects once and asks for one port, keeping no spare.
    let requests = alloc.requests.lock().unwrap().clone();
    let leases = |port: u16| -> Vec<u64> {
        requests
            .iter()
            .filter(|r| r["op"] == "lease" && r["remote_port"] == port)
            .map(|r| r["count"].as_u64().unwrap_or(1))
            .collect()
    };
    assert_eq!(leases(IPERF_PORT), [1, 1, 2, 4, 8], "{requests:?}");
    assert_eq!(leases(SINK_PORT), vec![1; FLOWS], "{requests:?}");
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn cgroup_bpf_steers_iperf3_and_separate_processes() {
    testkit::require_root("network namespaces, XDP, cgroup BPF");
    testkit::require_program("iperf3", "`make deps` installs it");
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (lab, p_iperf, p_sink) = lab_with_plans("bbpf");
    let cgroup = TempCgroup::create().unwrap();
    let binder = CgroupBinder::attach(cgroup.path()).unwrap();
    binder.set_plan(&p_iperf).unwrap();
    binder.set_plan(&p_sink).unwrap();

    iperf_as_planned(&lab, &p_iperf, "bpf iperf3 -P 8", |cmd| {
        cgroup.enter_in_child(cmd).unwrap();
    });
    streams_as_planned(&lab, &p_sink, "bpf 8 processes", |cmd| {
        cgroup.enter_in_child(cmd).unwrap()
    });
    let stats = binder.stats().unwrap();
    assert_eq!(stats.bound, (FLOWS + 1 + FLOWS) as u64, "{stats:?}");
    assert_eq!(stats.fallback, 0, "{stats:?}");
}

/// The planner avoids the ports of the namespace the clients run in, not
/// of the caller's: there a port held by another socket (a TIME_WAIT one
/// from the last run too) would fail `bpf_bind` and the connect would fall
/// back to a kernel-chosen port.
#[test]
#[ignore = "needs root (namespaces, veth, cgroup BPF): `make test` runs it as root"]
fn plans_avoid_the_ports_held_in_the_senders_namespace() {
    testkit::require_root("network namespaces, cgroup BPF");
    let lab = Lab::up(&spec(&unique_name("bheld")))
        .unwrap()
        .teardown_on_drop();
    let snd = lab.sender();
    host::netns::set_sysctl(&snd.netns, "net.ipv4.ip_local_port_range", "40000 40191").unwrap();
    let held: Vec<TcpListener> = host::netns::run_in(Some(&snd.netns), || {
        (40000..40064)
            .map(|port| TcpListener::bind(("0.0.0.0", port)).unwrap())
            .collect()
    })
    .unwrap();
    let cgroup = TempCgroup::create().unwrap();
    let binder = CgroupBinder::attach(cgroup.path()).unwrap();
    let to = SocketAddr::new(lab.receiver().ipv4.into(), IPERF_PORT);
    let config = lab.rss_config().unwrap();
    let from = IpAddr::V4(snd.ipv4);
    let planned =
        binder::plans::plan_and_install(&binder, &config, Some(&snd.netns), from, &[to], 8)
            .unwrap();
    let ports: Vec<u16> = planned[0].plan.entries.iter().map(|e| e.port).collect();
    assert_eq!(ports.len(), 8);
    assert!(
        ports.iter().all(|p| (40064..=40191).contains(p)),
        "planned {ports:?} outside the sender's free ports 40064-40191"
    );
    drop(held);
}

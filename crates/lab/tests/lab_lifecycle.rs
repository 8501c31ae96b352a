//! The lab's lifecycle as root: idempotent up/down, cleanup limited to what
//! the lab created, and TCP across the lab with software RSS attached.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use host::netns::exists as netns_exists;
use lab::{unique_name, Lab, LabSpec};

testkit::strict_mode_guard!();

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn up_and_down_are_idempotent() {
    testkit::require_root("network namespaces, veths, XDP");
    let name = unique_name("lu");
    let spec = LabSpec::new(&name);
    let lab = Lab::up(&spec).unwrap();
    let again = Lab::up(&spec).unwrap();
    assert_eq!(lab.hosts(), again.hosts());
    assert_eq!(lab.rss_config().unwrap(), again.rss_config().unwrap());
    // A program run in a host is in that host's namespace: the one whose
    // namespace file is the host's (same inode), and it sees its devices.
    for host in lab.hosts() {
        let out = lab
            .command(&host.name, "readlink")
            .unwrap()
            .arg("/proc/self/ns/net")
            .output()
            .unwrap();
        let ino = std::fs::metadata(host::netns::path(&host.netns).unwrap())
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .unwrap();
        let shown = String::from_utf8_lossy(&out.stdout);
        assert_eq!(shown.trim(), format!("net:[{ino}]"), "{}", host.name);
    }
    let missing = lab
        .command("snd", "steer-no-such-program")
        .unwrap()
        .status();
    assert_eq!(missing.unwrap_err().kind(), std::io::ErrorKind::NotFound);
    let status = Lab::status(&name).unwrap();
    assert!(status.software_rss);
    assert_eq!(status.queues, Some(4));
    assert!(Lab::list().unwrap().contains(&name));
    Lab::down(&name).unwrap();
    Lab::down(&name).unwrap();
    for host in lab.hosts() {
        assert!(!netns_exists(&host.netns), "{} left behind", host.netns);
    }
    assert!(!nic::state::pin_dir("veth0", Some(&lab.receiver().netns)).exists());
    assert!(matches!(
        Lab::open(&name),
        Err(lab::LabError::NoSuchLab { .. })
    ));
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn down_removes_only_what_it_created() {
    testkit::require_root("network namespaces, veths, XDP");
    let name = unique_name("lo");
    // A namespace with the name the lab wants for its sender, made by
    // someone else: `up` must refuse, and the cleanup must leave it alone.
    let foreign = format!("{name}-snd");
    host::netns::add(&foreign).unwrap();
    let err = Lab::up(&LabSpec::new(&name)).unwrap_err();
    assert!(
        matches!(err, lab::LabError::NamespaceExists { .. }),
        "{err}"
    );
    assert!(netns_exists(&foreign));
    assert!(!netns_exists(&format!("{name}-rcv")));
    Lab::down(&name).unwrap();
    assert!(netns_exists(&foreign));
    host::netns::delete(&foreign).unwrap();
}

/// Sends `bytes` over TCP from `from` to the receiver; returns what arrived.
fn tcp_transfer(lab: &Lab, from: &str, port: u16, bytes: usize) -> usize {
    let (rcv, snd) = (lab.receiver().clone(), lab.host(from).unwrap().clone());
    let addr = SocketAddr::new(rcv.ipv4.into(), port);
    let listener = host::netns::run_in(Some(&rcv.netns), move || TcpListener::bind(addr))
        .unwrap()
        .unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0;
        loop {
            match conn.read(&mut buf).unwrap() {
                0 => break total,
                n => total += n,
            }
        }
    });
    host::netns::run_in(Some(&snd.netns), move || {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        s.set_write_timeout(Some(Duration::from_secs(20)))?;
        let chunk = vec![0x5au8; 1 << 16];
        for _ in 0..bytes / chunk.len() {
            s.write_all(&chunk)?;
        }
        Ok::<(), std::io::Error>(())
    })
    .unwrap()
    .unwrap();
    server.join().unwrap()
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn three_hosts_join_through_a_switch() {
    testkit::require_root("network namespaces, veths, XDP");
    let mut spec = LabSpec::new(&unique_name("l3"));
    spec.hosts = vec!["a".into(), "b".into(), "rcv".into()];
    let lab = Lab::up(&spec).unwrap().teardown_on_drop();
    assert_eq!(lab.receiver().name, "rcv");
    assert_eq!(lab.sender().name, "a");
    assert_eq!(tcp_transfer(&lab, "b", 5002, 4 << 20), 4 << 20);
}

/// Bytes arrive over TCP through the XDP program and its cpumap: this fails
/// if the checksum pitfall is not handled (segments would be dropped).
#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn tcp_works_with_software_rss() {
    testkit::require_root("network namespaces, veths, XDP");
    let mut spec = LabSpec::new(&unique_name("lt"));
    spec.queues = 8;
    let lab = Lab::up(&spec).unwrap().teardown_on_drop();
    let rcv = lab.receiver().clone();
    nic::reset_stats(&rcv.dev, Some(&rcv.netns)).unwrap();
    assert_eq!(tcp_transfer(&lab, "snd", 5001, 16 << 20), 16 << 20);
    let stats = nic::stats(&rcv.dev, Some(&rcv.netns)).unwrap();
    let packets: u64 = stats.queues.iter().map(|q| q.packets).sum();
    let bytes: u64 = stats.queues.iter().map(|q| q.bytes).sum();
    assert!(packets > 0 && bytes >= 16 << 20, "{stats:?}");
}

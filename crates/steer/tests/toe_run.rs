//! `steer toe run` through the real binary: unmodified programs on the
//! userspace TCP data path against Linux TCP, as root in a lab.
//!
//! - Python's http.server on the data path (bound to `::`, dual-stack, so
//!   IPv4 arrives v4-mapped) serves a file that curl on the Linux side
//!   (`steer lab exec`) fetches, byte for byte; then curl on the data path
//!   fetches the file from Linux's http.server, byte for byte; then the
//!   same server on an IPv6 data path (`--addr`) serves curl over IPv6.
//! - iperf3 client and server on the data path against Linux's iperf3.
//! - Bad input: one line and exit 2.

mod common;

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{fails_with_one_line, steer};
use lab::{unique_name, Lab, LabSpec};
use testkit::TempDir;

testkit::strict_mode_guard!();

fn steer_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("steer")
}

/// A lab with IPv6 and without software RSS (the receiver's device is the
/// data path's).
fn lab() -> lab::LabGuard {
    testkit::require_root("AF_XDP and network namespaces");
    let mut spec = LabSpec::new(&unique_name("ttoe"));
    spec.software_rss = false;
    Lab::up(&spec).unwrap().teardown_on_drop()
}

fn blob(dir: &Path, len: usize) -> Vec<u8> {
    let bytes: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[1])
        .collect();
    std::fs::write(dir.join("blob.bin"), &bytes).unwrap();
    bytes
}

/// Waits until `to` accepts connections from `netns`.
fn wait_listening(netns: &str, to: SocketAddr, what: &str, server: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ok = host::netns::run_in(Some(netns), move || {
            TcpStream::connect_timeout(&to, Duration::from_millis(500)).is_ok()
        })
        .unwrap();
        if ok {
            return;
        }
        if let Some(status) = server.try_wait().unwrap() {
            panic!("{what} exited before it listened: {status}");
        }
        assert!(Instant::now() < deadline, "{what} never listened on {to}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A server started through `steer toe run` or `steer lab exec`, stopped
/// on drop (also when the test fails).
struct Server(Option<Child>);

impl Server {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("running")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = self.0.take() {
            stop(child);
        }
    }
}

/// Stops a server: SIGTERM to steer, which passes it on to the program
/// and ends with it.
fn stop(mut steer: Child) {
    // SAFETY: a signal to a child process of ours.
    unsafe { libc::kill(steer.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while steer.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = steer.kill();
            let _ = steer.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn toe_run(lab: &Lab, program: &[&str]) -> Command {
    toe_run_on(lab, "toe", program)
}

/// `steer toe run` with the data path's `engine`.
fn toe_run_on(lab: &Lab, engine: &str, program: &[&str]) -> Command {
    let mut cmd = Command::new(steer_bin());
    cmd.args([
        "toe",
        "run",
        "rcv",
        "--lab",
        lab.name(),
        "--engine",
        engine,
        "--",
    ])
    .args(program);
    cmd
}

fn lab_exec(lab: &Lab, host: &str, program: &[&str]) -> Command {
    let mut cmd = Command::new(steer_bin());
    cmd.args(["lab", "exec", host, "--lab", lab.name(), "--"])
        .args(program);
    cmd
}

/// Starts `server`, an http.server serving `dir`, and waits until `at`
/// accepts connections from `netns`.
fn start_server(
    mut server: Command,
    dir: &Path,
    netns: &str,
    at: SocketAddr,
    what: &str,
) -> Server {
    let child = server
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(Some(child));
    wait_listening(netns, at, what, server.child());
    server
}

/// Runs `curl` (its arguments ending in `-o`) to fetch `url` into `out`:
/// what arrived must be `sent`, byte for byte.
fn fetch(mut curl: Command, out: &Path, url: String, what: &str, sent: &[u8]) {
    let status = curl.arg(out).arg(url).status().unwrap();
    assert!(status.success(), "{what}: {status}");
    let got = std::fs::read(out).unwrap();
    assert!(
        got == sent,
        "{what}: the file differs ({} bytes)",
        got.len()
    );
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn http_server_and_curl_run_unmodified_on_the_data_path_byte_exactly() {
    let lab = lab();
    http_both_ways(&lab, "the data path", &[], &["--bind", "::"], 8000, 3 << 20);
    let dir = TempDir::new("steer-toe-www");
    let sent = blob(dir.path(), 3 << 20);

    // An IPv6 data path serves curl over IPv6.
    let rcv6 = IpAddr::V6(lab.receiver().ipv6.expect("a lab with IPv6"));
    let mut on_ipv6 = Command::new(steer_bin());
    on_ipv6
        .args(["toe", "run", "rcv", "--lab", lab.name(), "--addr"])
        .arg(rcv6.to_string())
        .args([
            "--",
            "python3",
            "-m",
            "http.server",
            "8002",
            "--bind",
            "::",
            "--directory",
        ]);
    let to = SocketAddr::new(rcv6, 8002);
    let server = start_server(
        on_ipv6,
        dir.path(),
        &lab.sender().netns,
        to,
        "http.server on the IPv6 data path",
    );
    fetch(
        lab_exec(&lab, "snd", &["curl", "-sS", "--fail", "-g", "-o"]),
        &dir.join("fetched-over-ipv6.bin"),
        format!("http://{to}/blob.bin"),
        "curl over IPv6",
        &sent,
    );
    drop(server);
}

/// Python's http.server on the data path fetched by curl on Linux, then
/// http.server on Linux fetched by curl on the data path, `len` bytes
/// each, byte for byte. `steer_args` choose the engine (and its layout),
/// `server_args` go to the data path's http.server (before its
/// directory); `port` and `port + 1` are the two servers'.
fn http_both_ways(
    lab: &Lab,
    what: &str,
    steer_args: &[&str],
    server_args: &[&str],
    port: u16,
    len: usize,
) {
    let on_data_path = |program: &[&str]| {
        let mut cmd = Command::new(steer_bin());
        cmd.args(["toe", "run", "rcv", "--lab", lab.name()])
            .args(steer_args)
            .arg("--")
            .args(program);
        cmd
    };
    let dir = TempDir::new("steer-toe-engine");
    let sent = blob(dir.path(), len);
    let (p0, p1) = (port.to_string(), (port + 1).to_string());
    let to = SocketAddr::new(IpAddr::V4(lab.receiver().ipv4), port);
    let server_on_data_path = [
        &["python3", "-m", "http.server", &p0],
        server_args,
        &["--directory"],
    ]
    .concat();
    let server = start_server(
        on_data_path(&server_on_data_path),
        dir.path(),
        &lab.sender().netns,
        to,
        &format!("http.server on {what}"),
    );
    fetch(
        lab_exec(lab, "snd", &["curl", "-sS", "--fail", "-o"]),
        &dir.join("fetched-from-the-data-path.bin"),
        format!("http://{to}/blob.bin"),
        &format!("curl from Linux, served on {what}"),
        &sent,
    );
    drop(server);

    let from = SocketAddr::new(IpAddr::V4(lab.sender().ipv4), port + 1);
    let server = start_server(
        lab_exec(
            lab,
            "snd",
            &["python3", "-m", "http.server", &p1, "--directory"],
        ),
        dir.path(),
        &lab.receiver().netns,
        from,
        "http.server on Linux",
    );
    fetch(
        on_data_path(&["curl", "-sS", "--fail", "-o"]),
        &dir.join("fetched-by-the-data-path.bin"),
        format!("http://{from}/blob.bin"),
        &format!("curl on {what}"),
        &sent,
    );
    drop(server);
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn http_server_and_curl_run_unmodified_on_the_laminar_engine_byte_exactly() {
    let lab = lab();
    http_both_ways(
        &lab,
        "the Laminar engine",
        &["--engine", "laminar"],
        &[],
        8010,
        2 << 20,
    );
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn http_server_and_curl_run_unmodified_on_the_pipelined_engine_byte_exactly() {
    let lab = lab();
    // The default layout: every stage on one worker thread.
    http_both_ways(
        &lab,
        "the pipeline",
        &["--engine", "pipeline"],
        &[],
        8020,
        2 << 20,
    );
    // Two flow groups, two replicas of each parallel stage, two threads.
    let layout = [
        "--engine",
        "pipeline",
        "--pipeline-groups",
        "2",
        "--pipeline-pre",
        "2",
        "--pipeline-post",
        "2",
        "--pipeline-copy",
        "2",
        "--pipeline-threads",
        "2",
    ];
    http_both_ways(&lab, "the two-group pipeline", &layout, &[], 8022, 2 << 20);
}

/// iperf3's JSON: the bytes the receiving end counted.
fn received_bytes(json: &[u8]) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    v["end"]["sum_received"]["bytes"].as_u64()
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn iperf3_client_and_server_run_unmodified_on_the_data_path() {
    testkit::require_program("iperf3", "apt-get install iperf3");
    let lab = lab();
    let rcv = lab.receiver().ipv4.to_string();
    let snd = lab.sender().ipv4.to_string();
    for (server_on_toe, port) in [(false, "5301"), (true, "5302")] {
        let server_args = ["iperf3", "-s", "-1", "-p", port];
        let server = if server_on_toe {
            toe_run(&lab, &server_args)
        } else {
            lab_exec(&lab, "snd", &server_args)
        }
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
        let mut server = Server(Some(server));
        let at = if server_on_toe { &rcv } else { &snd };
        let to = SocketAddr::new(at.parse().unwrap(), port.parse().unwrap());
        // iperf3 -s -1 serves one test, so a probe would use it up: the
        // client itself retries until the server is up.
        let client_args = ["iperf3", "-c", at, "-p", port, "-t", "2", "--json"];
        let deadline = Instant::now() + Duration::from_secs(20);
        let out = loop {
            let out = if server_on_toe {
                lab_exec(&lab, "snd", &client_args)
            } else {
                toe_run(&lab, &client_args)
            }
            .output()
            .unwrap();
            // iperf3 3.12 exits 0 with --json when it cannot connect: the
            // JSON says whether the test ran.
            let ran = out.status.success() && received_bytes(&out.stdout).is_some();
            if ran || Instant::now() > deadline {
                break out;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(
            out.status.success(),
            "iperf3 client to {to}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
        let bytes = received_bytes(&out.stdout).unwrap_or_else(|| {
            panic!(
                "no end.sum_received.bytes in iperf3's JSON (server on the data path: \
                 {server_on_toe}):\n{}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        assert!(bytes > 10 << 20, "iperf3 moved only {bytes} bytes to {to}");
        let status = server.child().wait().unwrap();
        server.0 = None;
        assert!(
            status.success(),
            "iperf3 server (on the data path: {server_on_toe}): {status}"
        );
    }
}

#[test]
fn toe_run_without_a_lab_is_bad_input() {
    let out = steer()
        .args([
            "toe",
            "run",
            "rcv",
            "--lab",
            "no-such-lab-toe-run",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    fails_with_one_line(&out, 2, "no lab named 'no-such-lab-toe-run'");
}

#[test]
fn toe_run_refuses_a_pipeline_layout_without_stages() {
    let out = steer()
        .args(["toe", "run", "rcv", "--lab", "no-such-lab-toe-run"])
        .args([
            "--engine",
            "pipeline",
            "--pipeline-groups",
            "0",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.lines()
            .next()
            .is_some_and(|l| l.contains("--pipeline-groups") && l.contains("0 is not in 1..=255")),
        "{err}"
    );
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn sigterm_to_steer_ends_the_program_and_removes_the_services_socket() {
    let lab = lab();
    let mut steer = toe_run(&lab, &["sleep", "300"]).spawn().unwrap();
    let socket =
        std::env::temp_dir().join(format!("steer-toe-{}-rcv-{}.sock", lab.name(), steer.id()));
    let program = testkit::child_of(steer.id(), Some("sleep"));
    assert!(socket.exists(), "{} is not there", socket.display());
    // SAFETY: a signal to a process this test started.
    unsafe { libc::kill(steer.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = steer.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "steer did not end");
        std::thread::sleep(Duration::from_millis(50));
    };
    // The program ended by the signal, and steer said so as a shell does.
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    assert!(
        !Path::new(&format!("/proc/{program}")).exists(),
        "the program outlived steer"
    );
    assert!(!socket.exists(), "{} was left behind", socket.display());
}

/// An idle data path gives its core back (it shares it with the
/// application): with a server listening, and then with a connection open
/// that carries nothing, `steer toe run` uses under 2% of a core on every
/// engine and in the two-thread pipeline layout, counted as the CPU time of
/// all of steer's threads (not the server's) over 2 s each.
#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP): `make test` runs it as root"]
fn an_idle_data_path_uses_under_two_percent_of_a_core_on_every_engine() {
    let lab = lab();
    let layouts: [&[&str]; 4] = [
        &["--engine", "toe"],
        &["--engine", "laminar"],
        &["--engine", "pipeline"],
        &["--engine", "pipeline", "--pipeline-threads", "2"],
    ];
    let dir = TempDir::new("steer-toe-idle");
    let snd = lab.sender().netns.clone();
    for (i, args) in layouts.into_iter().enumerate() {
        let port = 8040 + i as u16;
        let to = SocketAddr::new(IpAddr::V4(lab.receiver().ipv4), port);
        let mut cmd = Command::new(steer_bin());
        cmd.args(["toe", "run", "rcv", "--lab", lab.name()])
            .args(args)
            .args(["--", "python3", "-m", "http.server", &port.to_string()])
            .arg("--directory");
        let mut steer = start_server(cmd, dir.path(), &snd, to, "http.server");
        let pid = steer.child().id();
        let listening = idle_share(pid);
        let held = host::netns::run_in(Some(&snd), move || TcpStream::connect(to))
            .unwrap()
            .unwrap();
        let connected = idle_share(pid);
        drop(held);
        eprintln!(
            "{args:?}: {:.2}% of a core listening, {:.2}% with an idle connection",
            listening * 100.0,
            connected * 100.0
        );
        assert!(
            listening < 0.02 && connected < 0.02,
            "{args:?}: the idle data path used {:.1}% and {:.1}% of a core",
            listening * 100.0,
            connected * 100.0
        );
    }
}

/// The share of a core process `pid` used over 2 s, after 0.5 s to settle.
fn idle_share(pid: u32) -> f64 {
    std::thread::sleep(Duration::from_millis(500));
    let (cpu0, wall0) = (host::cpu::process_cpu_time(pid).unwrap(), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let used = host::cpu::process_cpu_time(pid).unwrap() - cpu0;
    used.as_secs_f64() / wall0.elapsed().as_secs_f64()
}

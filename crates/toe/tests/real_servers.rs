//! As root: real servers, unmodified, on the data path (`steer toe run`'s
//! way: the service on the receiver's device, the server in the receiver's
//! namespace with the sockets shim preloaded), their clients on Linux TCP
//! in the sender's namespace.
//!
//! - nginx, a master and 2 workers, sendfile on and the default listen
//!   backlog (so the master listens a second time to set it): a small file
//!   and a 1 MiB file come back byte for byte, over keep-alive connections
//!   and several at once; both workers accept (they inherited the listener
//!   when the master forked them, and wait on it with EPOLLEXCLUSIVE);
//!   killed workers' connections end at once (the data path closes what
//!   the dead processes held, as the kernel does) and the workers the
//!   master starts in their place serve on; nginx logs no alert.
//! - redis-server: values written with redis-cli SET (text, binary, 1 MiB)
//!   read back equal with GET, and redis-benchmark's clients (20 at once,
//!   plain and pipelined) all get answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use host::command::Daemon;
use lab::Lab;
use toe::Engine;

mod common;

use common::{pattern, toe_addr};

testkit::strict_mode_guard!();

const HTTP_PORT: u16 = 8080;
const REDIS_PORT: u16 = 6379;

/// Starts `cmd` as a server, its standard error to `stderr`: ended when
/// dropped (SIGTERM, then SIGKILL to it and its children after 5 s), so a
/// failing test leaves none behind.
fn spawn_server(mut cmd: Command, stderr: Stdio) -> Daemon {
    cmd.stdout(Stdio::null()).stderr(stderr);
    Daemon::spawn(&mut cmd).unwrap()
}

/// Prints the named log files when the test fails (before the scratch
/// directory holding them goes).
struct LogsOnFailure(Vec<std::path::PathBuf>);

impl Drop for LogsOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for path in &self.0 {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                eprintln!("---- {}\n{text}", path.display());
            }
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a process this test started (or its child).
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Waits until process `pid` has `n` children besides `other_than`; those.
fn wait_for_children(pid: u32, n: usize, other_than: &[u32]) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now: Vec<u32> = testkit::children(pid)
            .into_iter()
            .filter(|c| !other_than.contains(c))
            .collect();
        if now.len() == n {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} has children {now:?}, not {n} new ones"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A Linux TCP connection from the sender's namespace to `to`, retried
/// while the server is not listening yet (refused). The socket stays in
/// that namespace; it is used from the test's threads.
fn connect(lab: &Lab, to: SocketAddr) -> TcpStream {
    let s = host::netns::run_in(Some(&lab.sender().netns), move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match TcpStream::connect_timeout(&to, Duration::from_secs(5)) {
                Err(e)
                    if e.kind() == std::io::ErrorKind::ConnectionRefused
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(50))
                }
                r => return r,
            }
        }
    })
    .unwrap()
    .unwrap_or_else(|e| panic!("connect to {to}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// GET `path` on a keep-alive connection: the body of a 200 response.
/// The request goes out in two segments back to back (the request line,
/// then the headers), as a client's often does: the second may come while
/// the worker reads the first, and a worker waiting for an edge (nginx's
/// EPOLLET) must get one for it.
fn http_get(s: &mut TcpStream, path: &str) -> std::io::Result<Vec<u8>> {
    s.write_all(b"GET ")?;
    s.write_all(format!("{path} HTTP/1.1\r\nHost: steer\r\n\r\n").as_bytes())?;
    let mut r = BufReader::new(&*s);
    let mut status = String::new();
    r.read_line(&mut status)?;
    if !status.starts_with("HTTP/1.1 200 ") {
        return Err(std::io::Error::other(format!("{path}: {status:?}")));
    }
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                len = value.trim().parse::<usize>().ok();
            }
        }
    }
    let len = len.ok_or_else(|| std::io::Error::other(format!("{path}: no Content-Length")))?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    // Nothing past the body: the server sends only what was asked.
    assert!(r.buffer().is_empty(), "{path}: bytes after the body");
    Ok(body)
}

/// A body compared with the file served: byte for byte, and on a
/// difference the first offset that differs and both digests.
fn check_body(what: &str, got: &[u8], want: &[u8]) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} bytes (digest {:016x}), the file has {} (digest {:016x}); first difference at {at:?}",
            got.len(),
            digest(got),
            want.len(),
            digest(want)
        );
    }
}

/// FNV-1a, 64 bits: a digest to name a body by in a message.
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The lines of nginx's error log that say [alert] or [emerg].
fn alerts(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_else(|e| panic!("read nginx's error log {}: {e}", log.display()))
        .lines()
        .filter(|l| l.contains("[alert]") || l.contains("[emerg]"))
        .map(str::to_string)
        .collect()
}

/// The processes that accepted a connection on the data path, from the
/// shim's log lines (`STEER_TOE_DEBUG`) in nginx's error log.
fn accepting_pids(log: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(log)
        .unwrap_or_else(|e| panic!("read nginx's error log {}: {e}", log.display()));
    let mut pids: Vec<u32> = text
        .lines()
        .filter(|l| l.contains(" accepted connection "))
        .filter_map(|l| {
            l.strip_prefix("steer toe shim[")?
                .split(']')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

const NGINX_CONF: &str = "
daemon off;
master_process on;
worker_processes 2;
pid DIR/nginx.pid;
error_log DIR/error.log notice;
events { worker_connections 128; }
http {
    access_log off;
    sendfile on;
    client_body_temp_path DIR/tmp;
    proxy_temp_path DIR/tmp;
    fastcgi_temp_path DIR/tmp;
    uwsgi_temp_path DIR/tmp;
    scgi_temp_path DIR/tmp;
    server {
        listen PORT;
        root DIR/www;
    }
}
";

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP) and nginx: `make test` runs it as root"]
fn nginx_master_and_workers_serve_files_byte_exactly_and_outlive_a_killed_worker() {
    let nginx = testkit::require_program("nginx", "make deps installs Debian's nginx-light");
    let (lab, svc, socket) = common::lab_and_service("tngx", false, Engine::Toe);
    let dir = testkit::TempDir::new("steer-nginx");
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let small = b"steer: a small file, served by nginx on the data path\n".to_vec();
    let big = pattern(1 << 20, 9);
    std::fs::write(dir.join("www/small.txt"), &small).unwrap();
    std::fs::write(dir.join("www/big.bin"), &big).unwrap();
    let d = dir.path().display().to_string();
    let conf = NGINX_CONF
        .replace("DIR", &d)
        .replace("PORT", &HTTP_PORT.to_string());
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let log = dir.join("error.log");
    let _logs = LogsOnFailure(vec![log.clone(), dir.join("stderr.log")]);

    let mut cmd = common::on_data_path(&lab, &socket, nginx);
    cmd.arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .arg("-e")
        .arg(&log)
        // The shim's log (stderr, which nginx makes its error log once it
        // has started): the second listen(), and the processes that accept.
        .env(toe::app::DEBUG_ENV, "1");
    let stderr = std::fs::File::create(dir.join("stderr.log")).unwrap();
    let server = spawn_server(cmd, stderr.into());
    let workers = wait_for_children(server.pid(), 2, &[]);
    let to = SocketAddr::new(toe_addr(&lab), HTTP_PORT);

    // One keep-alive connection: both files, twice.
    let mut kept = connect(&lab, to);
    for round in 0..2 {
        check_body(
            &format!("small.txt ({round})"),
            &http_get(&mut kept, "/small.txt").unwrap(),
            &small,
        );
        check_body(
            &format!("big.bin ({round})"),
            &http_get(&mut kept, "/big.bin").unwrap(),
            &big,
        );
    }
    // Four clients at once, 1 MiB each; then connections one after
    // another: a worker that accepted 16 waits on the listener behind the
    // other (nginx re-adds it to its epoll set, as EPOLLEXCLUSIVE wakes the
    // first waiter), so both accept.
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let mut s = connect(&lab, to);
            std::thread::spawn(move || http_get(&mut s, "/big.bin"))
        })
        .collect();
    for (i, c) in clients.into_iter().enumerate() {
        check_body(
            &format!("big.bin, client {i}"),
            &c.join().unwrap().unwrap(),
            &big,
        );
    }
    for i in 0..100 {
        let mut s = connect(&lab, to);
        check_body(
            &format!("small.txt, connection {i}"),
            &http_get(&mut s, "/small.txt").unwrap(),
            &small,
        );
    }
    let accepted = accepting_pids(&log);
    assert!(
        workers.iter().all(|w| accepted.contains(w)),
        "workers {workers:?}, accepting processes {accepted:?}"
    );
    let text = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(
        text.contains("listens again (backlog 511)"),
        "nginx did not listen a second time:\n{text}"
    );
    assert_eq!(alerts(&log), Vec::<String>::new(), "nginx's error log");

    // Kill both workers: the keep-alive connection one of them held ends at
    // once (its FIN), as the kernel ends a dead process's connections, and
    // the master's new workers serve.
    for w in &workers {
        signal(*w, libc::SIGKILL);
    }
    kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    match kept.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "{} bytes after the kill", rest.len()),
        Err(e) => assert_eq!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset,
            "the killed worker's connection does not end: {e}"
        ),
    }
    let respawned = wait_for_children(server.pid(), 2, &workers);
    let mut s = connect(&lab, to);
    check_body(
        "big.bin after the kill",
        &http_get(&mut s, "/big.bin").unwrap(),
        &big,
    );
    check_body(
        "small.txt after the kill",
        &http_get(&mut s, "/small.txt").unwrap(),
        &small,
    );
    drop(s);
    let accepted = accepting_pids(&log);
    assert!(
        respawned.iter().any(|w| accepted.contains(w)),
        "new workers {respawned:?}, accepting processes {accepted:?}"
    );
    server.stop();
    // The only alerts: the master saying its workers were killed.
    let unexpected: Vec<String> = alerts(&log)
        .into_iter()
        .filter(|l| !l.contains("exited on signal 9"))
        .collect();
    assert_eq!(unexpected, Vec::<String>::new(), "nginx's error log");
    let c = svc.stop().unwrap();
    assert_eq!((c.malformed, c.bad_checksum), (0, 0), "{c:?}");
}

/// Runs `cmd` in the sender's namespace with `input` on its standard
/// input; its output, or the test fails after `limit`.
fn run_in_sender(lab: &Lab, mut cmd: Command, input: &[u8], limit: Duration) -> Output {
    host::netns::enter_in_child(&mut cmd, &lab.sender().netns).unwrap();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if std::fs::metadata(format!("/proc/{pid}")).is_err() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        signal(pid, libc::SIGKILL);
        true
    });
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    assert!(
        !watchdog.join().unwrap(),
        "{cmd:?} did not finish in {limit:?}"
    );
    out
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, AF_XDP) and redis: `make test` runs it as root"]
fn redis_on_the_data_path_reads_back_what_was_set_and_serves_many_clients() {
    let redis =
        testkit::require_program("redis-server", "make deps installs Debian's redis-server");
    let cli = testkit::require_program("redis-cli", "make deps installs Debian's redis-tools");
    let bench =
        testkit::require_program("redis-benchmark", "make deps installs Debian's redis-tools");
    let (lab, svc, socket) = common::lab_and_service("tredis", false, Engine::Toe);
    let dir = testkit::TempDir::new("steer-redis");
    let mut cmd = common::on_data_path(&lab, &socket, redis);
    cmd.args(["--port", &REDIS_PORT.to_string(), "--bind", "0.0.0.0"])
        .args(["--protected-mode", "no", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir.path())
        .arg("--logfile")
        .arg(dir.join("redis.log"));
    let _logs = LogsOnFailure(vec![dir.join("redis.log")]);
    let server = spawn_server(cmd, Stdio::null());
    let host = toe_addr(&lab).to_string();
    // Serving once a connection is accepted.
    drop(connect(&lab, SocketAddr::new(toe_addr(&lab), REDIS_PORT)));

    let mut binary: Vec<u8> = (0..=255u8).collect();
    binary.extend_from_slice(b"\r\n$-1\r\n*0\r\n\0\0");
    let values: [(&str, Vec<u8>); 3] = [
        ("text", b"steer on the data path".to_vec()),
        ("binary", binary),
        ("big", pattern(1 << 20, 5)),
    ];
    let limit = Duration::from_secs(10);
    for (key, value) in &values {
        let mut set = Command::new(&cli);
        set.args(["-h", &host, "-p", &REDIS_PORT.to_string(), "-x", "SET", key]);
        let out = run_in_sender(&lab, set, value, limit);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "OK\n",
            "SET {key}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (key, value) in &values {
        let mut get = Command::new(&cli);
        get.args([
            "-h",
            &host,
            "-p",
            &REDIS_PORT.to_string(),
            "--raw",
            "GET",
            key,
        ]);
        let out = run_in_sender(&lab, get, b"", limit);
        assert!(
            out.status.success(),
            "GET {key}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // --raw prints the value, then a newline.
        let got = out.stdout.strip_suffix(b"\n").unwrap_or(&out.stdout);
        check_body(&format!("GET {key}"), got, value);
    }

    // 20 clients at once, one request at a time and 16 pipelined.
    for pipeline in ["1", "16"] {
        let mut b = Command::new(&bench);
        b.args(["-h", &host, "-p", &REDIS_PORT.to_string()]).args([
            "-c",
            "20",
            "-n",
            "20000",
            "-P",
            pipeline,
            "-t",
            "set,get,lpush",
            "--csv",
        ]);
        let out = run_in_sender(&lab, b, b"", Duration::from_secs(20));
        let csv = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "redis-benchmark -P {pipeline}: {csv}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for test in ["SET", "GET", "LPUSH"] {
            let rps = csv
                .lines()
                .find_map(|l| l.strip_prefix(&format!("\"{test}\",\"")))
                .and_then(|rest| rest.split('"').next())
                .and_then(|v| v.parse::<f64>().ok());
            assert!(
                rps.is_some_and(|r| r > 0.0),
                "redis-benchmark -P {pipeline}: no {test} result\n{csv}"
            );
        }
    }
    server.stop();
    let c = svc.stop().unwrap();
    assert_eq!((c.malformed, c.bad_checksum), (0, 0), "{c:?}");
}

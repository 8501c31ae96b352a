//! The servers the apps experiment runs, unmodified, each from its Debian
//! package with a configuration of the experiment's own: nginx (a master
//! and 2 workers, sendfile), redis-server (no persistence) and memcached
//! (its main thread accepts and hands connections to 2 worker threads).
//! Each runs in the receiver's namespace on the server CPUs, on Linux TCP
//! or with the sockets shim on the data path (`steer toe run`'s way).

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use host::command::Daemon;

use super::Workload;
use crate::ExpError;

pub(crate) const HTTP_PORT: u16 = 8080;
pub(crate) const REDIS_PORT: u16 = 6379;
pub(crate) const MEMCACHED_PORT: u16 = 11211;

/// The files nginx serves: a small page and a 1 MiB file.
pub(crate) const SMALL_PATH: &str = "/small.html";
pub(crate) const LARGE_PATH: &str = "/large.bin";
const SMALL_BYTES: usize = 1024;
const LARGE_BYTES: usize = 1 << 20;

/// nginx as the experiment runs it: 2 workers, sendfile, keep-alive
/// connections that last the run (wrk keeps its connections; nginx's
/// default closes one after 1000 requests).
const NGINX_CONF: &str = "
daemon off;
master_process on;
worker_processes 2;
pid DIR/nginx.pid;
error_log DIR/error.log notice;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    keepalive_requests 1000000;
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

/// Where a server runs: the receiver's namespace, its CPUs, and the data
/// path's service socket (None: Linux TCP).
pub(crate) struct Placement<'a> {
    pub netns: &'a str,
    pub cpus: &'a [usize],
    pub data_path: Option<&'a Path>,
}

/// A server running for one workload: ended when dropped.
pub(crate) struct Server {
    daemon: Daemon,
    program: &'static str,
    dir: PathBuf,
}

impl Server {
    /// Starts `workload`'s server in `dir` (created and filled here).
    pub fn start(workload: Workload, at: &Placement<'_>, dir: &Path) -> Result<Server, ExpError> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        let (program, mut cmd) = match workload {
            Workload::NginxSmall | Workload::NginxLarge => ("nginx", nginx(dir)?),
            Workload::Redis | Workload::RedisPipelined => ("redis-server", redis(dir)),
            Workload::Memcached => ("memcached", memcached()),
        };
        host::netns::enter_in_child(&mut cmd, at.netns).map_err(lab::LabError::from)?;
        host::cpu::pin_in_child(&mut cmd, at.cpus);
        if let Some(socket) = at.data_path {
            let shim = toe::app::shim::install().map_err(|e| ExpError::Program {
                program: "the sockets shim".into(),
                detail: e.to_string(),
            })?;
            toe::app::shim::configure(&mut cmd, &shim, socket);
        }
        let stderr = std::fs::File::create(dir.join("stderr.log")).map_err(|e| io_error(dir, e))?;
        cmd.stdout(Stdio::null()).stderr(stderr);
        if host::command::find_program(program).is_none() {
            return Err(ExpError::MissingProgram {
                program: program.into(),
            });
        }
        let daemon = Daemon::spawn(&mut cmd).map_err(|e| ExpError::Program {
            program: program.into(),
            detail: e.to_string(),
        })?;
        Ok(Server {
            daemon,
            program,
            dir: dir.to_path_buf(),
        })
    }

    /// Waits until the server accepts connections at `to` from namespace
    /// `client_netns`; an error when it exits or does not within 10 s.
    pub fn wait_listening(&mut self, client_netns: &str, to: SocketAddr) -> Result<(), ExpError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.daemon.exited() {
                return Err(self.failed(format!("exited before it listened ({status})")));
            }
            let connected = host::netns::run_in(Some(client_netns), move || {
                TcpStream::connect_timeout(&to, Duration::from_secs(1)).is_ok()
            })
            .map_err(lab::LabError::from)?;
            if connected {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.failed(format!("does not accept connections at {to} in 10 s")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server; the errors it reported: it exited by itself, or
    /// nginx logged an [alert], [crit] or [emerg] line.
    pub fn stop(mut self) -> Vec<String> {
        let mut errors = Vec::new();
        if let Some(status) = self.daemon.exited() {
            errors.push(format!("{} exited during the run ({status})", self.program));
        }
        let _ = self.daemon.stop();
        if self.program == "nginx" {
            errors.extend(nginx_alerts(&self.dir.join("error.log")));
        }
        errors
    }

    fn failed(&mut self, what: String) -> ExpError {
        let log = std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default();
        let last = log.lines().last().unwrap_or("").to_string();
        ExpError::Program {
            program: self.program.into(),
            detail: format!("{what}; its last words: {last:?}"),
        }
    }
}

/// The files nginx serves, by path: what `verify_files` compares with.
pub(crate) fn nginx_files() -> Vec<(&'static str, Vec<u8>)> {
    let bytes = |n: usize| (0..n as u64).map(crate::datapath::pattern).collect();
    vec![
        (SMALL_PATH, bytes(SMALL_BYTES)),
        (LARGE_PATH, bytes(LARGE_BYTES)),
    ]
}

fn nginx(dir: &Path) -> Result<Command, ExpError> {
    for sub in ["www", "tmp"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|e| io_error(dir, e))?;
    }
    for (path, bytes) in nginx_files() {
        let file = dir.join("www").join(path.trim_start_matches('/'));
        std::fs::write(&file, bytes).map_err(|e| io_error(&file, e))?;
    }
    let conf = NGINX_CONF
        .replace("DIR", &dir.display().to_string())
        .replace("PORT", &HTTP_PORT.to_string());
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).map_err(|e| io_error(&path, e))?;
    let mut cmd = Command::new("nginx");
    cmd.arg("-p").arg(dir).arg("-c").arg(&path);
    cmd.arg("-e").arg(dir.join("error.log"));
    Ok(cmd)
}

fn redis(dir: &Path) -> Command {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &REDIS_PORT.to_string(), "--bind", "0.0.0.0"])
        .args(["--protected-mode", "no", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"));
    cmd
}

/// memcached with 2 worker threads (`-t 2`): connections are accepted on
/// its main thread and served on the workers.
fn memcached() -> Command {
    let mut cmd = Command::new("memcached");
    cmd.args(["-l", "0.0.0.0", "-p", &MEMCACHED_PORT.to_string()])
        .args([
            "-U", "0", "-t", "2", "-c", "4096", "-m", "256", "-u", "root",
        ]);
    cmd
}

/// The lines of nginx's error log that say [alert], [crit] or [emerg]; a
/// log that cannot be read is itself one.
fn nginx_alerts(log: &Path) -> Vec<String> {
    match std::fs::read_to_string(log) {
        Ok(text) => text
            .lines()
            .filter(|l| {
                ["[alert]", "[crit]", "[emerg]"]
                    .iter()
                    .any(|m| l.contains(m))
            })
            .map(str::to_string)
            .collect(),
        Err(e) => vec![format!("nginx's error log {}: {e}", log.display())],
    }
}

/// The server's address on the stack: the receiver's own for Linux, the
/// data path's for an engine.
pub(crate) fn address(lab: &lab::Lab, data_path: bool) -> IpAddr {
    if data_path {
        crate::datapath::toe_addr(lab)
    } else {
        IpAddr::V4(lab.receiver().ipv4)
    }
}

fn io_error(path: &Path, e: std::io::Error) -> ExpError {
    ExpError::Program {
        program: "the apps experiment's scratch directory".into(),
        detail: format!("{}: {e}", path.display()),
    }
}

//! The whole command tree of `steer`, walked through the real binary: every
//! command's `--help` exits 0 with its usage and says what each option does;
//! every command that prints runs with `--json` and prints JSON that parses;
//! a command whose output is another program's refuses `--json` (exit 2).
//!
//! [`COMMANDS`] names every command and how its `--json` is checked here;
//! the walk fails when a command is added without an entry, and each check
//! fails when it did not run every command of its kind.

mod common;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{cgroup2_root, microsoft_config, steer, Cgroup, Serve};
use serde_json::Value;
use testkit::{shared_trace, TempDir};

testkit::strict_mode_guard!();

/// How a command's `--json` is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Json {
    /// Runs without root or a lab: [`json_without_a_lab`].
    Plain,
    /// Needs root: runs in labs (and a cgroup) the test builds:
    /// [`json_as_root_in_labs`].
    Root,
    /// Prints another program's output: refuses `--json` with exit 2
    /// ([`json_is_refused_where_the_output_is_a_programs`]).
    Refused,
}

/// Every command of `steer` (the leaves of the tree), and how its `--json`
/// is checked.
const COMMANDS: &[(&str, Json)] = &[
    ("rss show", Json::Plain),
    ("rss where", Json::Plain),
    ("rss config", Json::Plain),
    ("nic attach", Json::Root),
    ("nic update", Json::Root),
    ("nic stats", Json::Root),
    ("nic flows", Json::Root),
    ("nic detach", Json::Root),
    ("lab up", Json::Root),
    ("lab down", Json::Root),
    ("lab status", Json::Root),
    ("lab exec", Json::Refused),
    ("demo", Json::Root),
    ("exp xdp-overhead", Json::Root),
    ("exp crossrss", Json::Root),
    ("exp srpic", Json::Root),
    ("exp toe", Json::Root),
    ("exp ooo", Json::Root),
    ("exp loss", Json::Root),
    ("exp apps", Json::Root),
    ("rmt example table-5.1", Json::Plain),
    ("rmt report", Json::Plain),
    ("bench run", Json::Plain),
    ("bench list", Json::Plain),
    ("bench history", Json::Plain),
    ("bench compare", Json::Plain),
    ("bench check", Json::Plain),
    ("bench report", Json::Plain),
    ("bench criterion-json", Json::Plain),
    ("lb sim", Json::Plain),
    ("lb run", Json::Root),
    ("exec", Json::Refused),
    ("toe run", Json::Refused),
    ("attach", Json::Root),
    ("agent", Json::Plain),
    ("ports odds", Json::Plain),
    ("ports plan", Json::Plain),
    ("ports serve", Json::Plain),
    ("ports lease", Json::Plain),
    ("ports status", Json::Plain),
    ("reorder stats", Json::Plain),
    ("reorder sort", Json::Plain),
    ("wire up", Json::Root),
    ("wire down", Json::Root),
    ("wire run", Json::Root),
    ("wire srpic", Json::Root),
];

fn commands_of(kind: Json) -> BTreeSet<String> {
    COMMANDS
        .iter()
        .filter(|(_, k)| *k == kind)
        .map(|(c, _)| c.to_string())
        .collect()
}

/// `steer PATH... ARGS...`: its output, asserting exit 0.
fn run_ok(path: &[&str], args: &[&str]) -> std::process::Output {
    let out = steer().args(path).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "steer {} {}: exit {:?}: {}",
        path.join(" "),
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The commands listed under `Commands:` in a help text (but `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Every entry of the `Options:` and `Arguments:` sections of a short
/// (`-h`) help, split into its spelling and its description. clap puts
/// every description on the line below its spelling, indented deeper,
/// when one of them would wrap beside it.
fn entries(help: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut inside = false;
    let mut spelling_indent = None;
    for line in help.lines() {
        if !line.starts_with(' ') {
            inside = matches!(line.trim_end(), "Options:" | "Arguments:");
            spelling_indent = None;
            continue;
        }
        if !inside || line.trim().is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let entry = line.trim_start();
        match (spelling_indent, out.last_mut()) {
            (Some(first), Some(last)) if indent > first + 2 && last.1.is_empty() => {
                last.1 = entry.trim().to_string();
            }
            _ => {
                spelling_indent.get_or_insert(indent);
                let (spelling, description) = entry.split_once("  ").unwrap_or((entry, ""));
                out.push((spelling.to_string(), description.trim().to_string()));
            }
        }
    }
    out
}

/// Walks the tree from `path`: checks each command's help and returns the
/// leaves (commands without subcommands).
fn walk(path: Vec<String>, leaves: &mut Vec<String>) {
    let words: Vec<&str> = path.iter().map(String::as_str).collect();
    let long = String::from_utf8(run_ok(&words, &["--help"]).stdout).unwrap();
    let usage = format!(
        "Usage: {}",
        ["steer"]
            .iter()
            .chain(&words)
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert!(long.contains(&usage), "no '{usage}' in:\n{long}");
    let short = String::from_utf8(run_ok(&words, &["-h"]).stdout).unwrap();
    for (spelling, description) in entries(&short) {
        assert!(
            !description.is_empty() && !description.starts_with('['),
            "steer {}: {spelling} has no description of what it does:\n{short}",
            words.join(" ")
        );
    }
    let children = subcommands(&long);
    if children.is_empty() {
        leaves.push(words.join(" "));
    }
    for child in children {
        let mut next = path.clone();
        next.push(child);
        walk(next, leaves);
    }
}

#[test]
fn every_help_exits_0_and_every_command_is_covered() {
    let mut leaves = Vec::new();
    walk(Vec::new(), &mut leaves);
    let found: BTreeSet<String> = leaves.into_iter().collect();
    let listed: BTreeSet<String> = COMMANDS.iter().map(|(c, _)| c.to_string()).collect();
    assert_eq!(listed.len(), COMMANDS.len(), "a command is listed twice");
    assert_eq!(
        found, listed,
        "the commands of `steer --help` (left) and the ones this test checks (right) differ"
    );
    // `steer help CMD` is the same help.
    run_ok(&["help", "ports", "plan"], &[]);
}

/// Parses stdout as JSON, naming the command when it does not.
fn json_of(what: &str, out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "steer {what} (with --json): stdout is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Runs `steer COMMAND --json ARGS...` and records COMMAND as checked.
struct Checked(BTreeSet<String>);

impl Checked {
    fn json(&mut self, command: &str, args: &[&str]) -> Value {
        self.json_in(command, args, None)
    }

    fn json_in(&mut self, command: &str, args: &[&str], dir: Option<&Path>) -> Value {
        let path: Vec<&str> = command.split(' ').collect();
        let mut cmd = steer();
        cmd.args(&path).arg("--json").args(args);
        if let Some(dir) = dir {
            cmd.current_dir(dir);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "steer {command} --json {}: exit {:?}: {}",
            args.join(" "),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        self.0.insert(command.to_string());
        json_of(&format!("{command} {}", args.join(" ")), &out)
    }

    /// A server's first JSON value on stdout (it then keeps running).
    fn serving(&mut self, command: &str, args: &[&str], env: &[(&str, &Path)]) -> (Serve, Value) {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("steer"));
        cmd.args(command.split(' ')).arg("--json").args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        // Both pipes stay open (and drained) while the server runs: a
        // server whose stdout or stderr reader went away fails its next
        // write.
        let (err_tx, err_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut err = String::new();
            let _ = stderr.read_to_string(&mut err);
            let _ = err_tx.send(err);
        });
        let serve = Serve(child);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = stdout;
            let first = serde_json::Deserializer::from_reader(&mut stdout)
                .into_iter::<Value>()
                .next();
            let _ = tx.send(first);
            // Whatever follows, until the server exits.
            let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        });
        let first = rx.recv_timeout(Duration::from_secs(30));
        let value = match first {
            Ok(Some(Ok(v))) => v,
            other => {
                drop(serve);
                let err = err_rx
                    .recv_timeout(Duration::from_secs(5))
                    .unwrap_or_default();
                panic!("steer {command} --json printed no JSON object ({other:?}): {err}");
            }
        };
        self.0.insert(command.to_string());
        (serve, value)
    }

    /// Asserts that every command of `kind` was checked.
    fn all_of(&self, kind: Json) {
        assert_eq!(
            self.0,
            commands_of(kind),
            "commands checked vs listed as {kind:?}"
        );
    }
}

const CHARGEN: &str = "tcptrace_urgent_chargen_bulk_2001.pcap";
const AUCKLAND: &str = "libtrace_auckland_atm_2000-01-25_oneway_rawip.pcap";

/// A matrix case file with one case that runs `steer ports odds`.
const CASES: &str = r#"
[[case]]
name = "odds"
command = ["{steer}", "ports", "odds", "--json", "--flows", "4", "--cores", "8", "--trials", "100"]
metrics = [{ name = "collision_free", pointer = "/collision_free", unit = "p", better = "higher" }]
"#;

#[test]
fn json_without_a_lab() {
    let dir = TempDir::new("steer-cli-walk");
    let cfg = dir.join("rcv.json");
    std::fs::write(&cfg, microsoft_config(4)).unwrap();
    let cfg = cfg.to_str().unwrap();
    let mut c = Checked(BTreeSet::new());

    let v = c.json("rss show", &["--dev", "lo"]);
    assert_eq!(v[0]["dev"], "lo", "{v}");
    let flow = ["66.9.149.187:2794", "161.142.100.80:1766"];
    let v = c.json(
        "rss where",
        &[flow[0], flow[1], "--key", "microsoft", "--queues", "4"],
    );
    assert_eq!(v["hash"], "0x51ccc178", "{v}");
    c.json("rss where", &["--sockets", "--config", cfg]);
    let v = c.json("rss config", &["--key", "microsoft", "--queues", "4"]);
    assert_eq!(v["queues"], 4, "{v}");

    let v = c.json(
        "ports odds",
        &["--flows", "4", "--cores", "8", "--trials", "100"],
    );
    assert!(v["collision_free"].is_number(), "{v}");
    let v = c.json(
        "ports plan",
        &[
            "--to",
            "10.0.0.2:5201",
            "--from",
            "10.0.0.1",
            "--flows",
            "4",
            "--config",
            cfg,
        ],
    );
    assert_eq!(v["entries"].as_array().map(Vec::len), Some(4), "{v}");
    let sock = dir.join("alloc.sock");
    let env = [("STEER_ALLOC_SOCK", sock.as_path())];
    let (_allocator, v) = c.serving(
        "ports serve",
        &["--config", cfg, "--for", "10.77.1.2", "--grace-ms", "60000"],
        &env,
    );
    assert_eq!(v["receivers"][0], "10.77.1.2", "{v}");
    let lease = ["--to", "10.77.1.2:5201", "--from", "10.77.1.1"];
    let with_socket = ["--socket", sock.to_str().unwrap()];
    let v = c.json("ports lease", &[&lease[..], &with_socket[..]].concat());
    assert!(v["port"].is_number(), "{v}");
    let v = c.json("ports status", &with_socket);
    assert_eq!(v["leases"].as_array().map(Vec::len), Some(1), "{v}");

    let port = testkit::free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let (_agent, v) = c.serving(
        "agent",
        &["--listen", &listen, "--config", cfg, "--for", "127.0.0.1"],
        &[],
    );
    assert!(v["url"].as_str().is_some_and(|u| u.contains(&port)), "{v}");

    let chargen = shared_trace(CHARGEN);
    let chargen = chargen.to_str().unwrap();
    let v = c.json("reorder stats", &[chargen]);
    let all = v["flows"].as_array().unwrap().len();
    // --min-packets filters the JSON as it filters the table.
    let v = c.json("reorder stats", &[chargen, "--min-packets", "100"]);
    let busy = v["flows"].as_array().unwrap();
    assert!(!busy.is_empty() && busy.len() < all, "{all} flows, {v}");
    assert!(
        busy.iter().all(|f| f["packets"].as_u64() >= Some(100)),
        "{v}"
    );
    let sorted = dir.join("sorted.pcap");
    let v = c.json(
        "reorder sort",
        &[chargen, "--block", "32", "-o", sorted.to_str().unwrap()],
    );
    assert!(v["packets"].as_u64().is_some_and(|n| n > 0), "{v}");
    let auckland = shared_trace(AUCKLAND);
    let v = c.json(
        "lb sim",
        &[
            "--trace",
            auckland.to_str().unwrap(),
            "--policy",
            "rr,crossrss",
            "--max-packets",
            "20000",
        ],
    );
    assert!(v.is_object(), "{v}");

    std::fs::write(dir.join("cases.toml"), CASES).unwrap();
    let bench = ["--cases", "cases.toml", "--no-builtin"];
    let db = ["--db", "h.sqlite"];
    let here = Some(dir.path());
    let v = c.json_in("bench list", &bench, here);
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");
    for _ in 0..2 {
        c.json_in("bench run", &[&bench[..], &db[..]].concat(), here);
    }
    let v = c.json_in("bench history", &db, here);
    assert_eq!(v.as_array().map(Vec::len), Some(2), "{v}");
    c.json_in("bench compare", &db, here);
    c.json_in(
        "bench check",
        &[&["--baseline", "b.json", "--update"][..], &db[..]].concat(),
        here,
    );
    c.json_in(
        "bench check",
        &[&["--baseline", "b.json"][..], &db[..]].concat(),
        here,
    );
    c.json_in(
        "bench report",
        &[&["-o", "report"][..], &db[..]].concat(),
        here,
    );
    // A "benchmark" that writes its estimates where criterion would.
    let benchmark = "d=\"$CRITERION_HOME/group/function/new\" && mkdir -p \"$d\" && echo \
        '{\"median\": {\"point_estimate\": 10.0}, \"mean\": {\"point_estimate\": 11.0}}' \
        > \"$d/estimates.json\"";
    let v = c.json_in("bench criterion-json", &["--", "sh", "-c", benchmark], here);
    assert_eq!(v["benchmarks"]["group/function"]["median_ns"], 10.0, "{v}");

    let v = c.json("rmt example table-5.1", &[]);
    assert!(v["rows"].as_array().is_some_and(|r| !r.is_empty()), "{v}");
    let v = c.json("rmt report", &[]);
    assert!(v.is_object() || v.is_array(), "{v}");

    c.all_of(Json::Plain);
}

#[test]
fn json_is_refused_where_the_output_is_a_programs() {
    let mut refused = BTreeSet::new();
    for args in [
        &["lab", "exec", "rcv", "--json", "--", "true"][..],
        &["exec", "--json", "--", "true"][..],
        &["toe", "run", "rcv", "--json", "--", "true"][..],
    ] {
        let out = steer().args(args).output().unwrap();
        common::fails_with_one_line(&out, 2, "--json");
        let command = match args[0] {
            "lab" => "lab exec",
            "toe" => "toe run",
            _ => "exec",
        };
        refused.insert(command.to_string());
    }
    assert_eq!(refused, commands_of(Json::Refused));
}

#[test]
fn old_spellings_are_accepted_but_not_shown() {
    let nic = String::from_utf8(run_ok(&["nic", "stats"], &["--help"]).stdout).unwrap();
    assert!(
        nic.contains("--dev <DEV>") && !nic.contains("[DEV]"),
        "{nic}"
    );
    let lab = String::from_utf8(run_ok(&["lab", "status"], &["--help"]).stdout).unwrap();
    assert!(
        lab.contains("--lab <NAME>") && !lab.contains("--name"),
        "{lab}"
    );
    // `--name` still names the lab: the lab it names does not exist (exit 2).
    let out = steer()
        .args(["lab", "status", "--name", "no-such-lab-cli-walk"])
        .output()
        .unwrap();
    common::fails_with_one_line(&out, 2, "no lab named 'no-such-lab-cli-walk'");
    // Both spellings at once, or neither: usage errors.
    for args in [
        &["nic", "stats", "veth0", "--dev", "veth1"][..],
        &["nic", "stats"][..],
        &["wire", "up"][..],
        &["wire", "up", "a", "--lab", "b"][..],
    ] {
        let out = steer().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn flags_that_would_be_ignored_are_refused() {
    for (args, needle) in [
        // --sockets places every live TCP connection; a --proto would be ignored.
        (
            &[
                "rss",
                "where",
                "--sockets",
                "--proto",
                "udp",
                "--key",
                "microsoft",
            ][..],
            "cannot be used with",
        ),
        // The config's queue count wins; a --queues would be ignored.
        (
            &["lab", "up", "--config", "rcv.json", "--queues", "3"][..],
            "cannot be used with",
        ),
        // ECN marking happens in the rate limiter's queue: none without a rate.
        (
            &["wire", "run", "--lab", "no-such-lab", "--ecn-mark", "20"][..],
            "ecn-mark '20'",
        ),
    ] {
        let out = steer().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// Takes a lab down at the end of the test, however it ends.
struct LabDown(String);

impl Drop for LabDown {
    fn drop(&mut self) {
        let _ = lab::Lab::down(&self.0);
    }
}

#[test]
#[ignore = "needs root (namespaces, veth, XDP, cgroup BPF): `make test` runs it as root"]
fn json_as_root_in_labs() {
    testkit::require_root("network namespaces, veth, XDP, cgroup BPF");
    let dir = TempDir::new("steer-cli-walk-root");
    let cfg = dir.join("rcv.json");
    std::fs::write(&cfg, microsoft_config(2)).unwrap();
    let cfg = cfg.to_str().unwrap();
    let mut c = Checked(BTreeSet::new());

    // A lab, and the software RSS on its receiver.
    let name = lab::unique_name("cw");
    let _down = LabDown(name.clone());
    let rcv_netns = format!("{name}-rcv");
    let v = c.json(
        "lab up",
        &[
            "--lab",
            &name,
            "--queues",
            "2",
            "--track-flows",
            "--no-ipv6",
        ],
    );
    assert_eq!(v["name"], name.as_str(), "{v}");
    let v = c.json("lab status", &["--lab", &name]);
    assert_eq!(v["name"], name.as_str(), "{v}");
    // The older spelling still works.
    c.json("lab status", &["--name", &name]);
    let dev = ["--dev", "veth0", "--netns", &rcv_netns];
    let v = c.json("nic stats", &dev);
    assert!(v["queues"].is_array(), "{v}");
    c.json("nic stats", &["veth0", "--netns", &rcv_netns]);
    let v = c.json("nic flows", &dev);
    assert!(v.is_array(), "{v}");
    let v = c.json("nic update", &[&dev[..], &["--config", cfg][..]].concat());
    assert_eq!(v["action"], "updated", "{v}");
    let v = c.json("nic detach", &dev);
    assert_eq!(v["action"], "detached", "{v}");
    let v = c.json(
        "nic attach",
        &[&dev[..], &["--config", cfg, "--track-flows"][..]].concat(),
    );
    assert_eq!(
        (v["action"].as_str(), v["queues"].as_u64()),
        (Some("attached"), Some(2)),
        "{v}"
    );
    let v = c.json("lab down", &["--lab", &name]);
    assert_eq!(v["down"], true, "{v}");

    // A lab with a wire between its hosts.
    let wired = lab::unique_name("cww");
    let _down_wired = LabDown(wired.clone());
    let v = c.json("wire up", &["--lab", &wired]);
    assert!(v["wire"].is_object(), "{v}");
    let v = c.json("wire run", &["--lab", &wired, "--seconds", "1"]);
    assert!(v["stats"].is_object(), "{v}");
    let v = c.json("wire srpic", &["--lab", &wired, "--seconds", "1"]);
    assert!(v["stats"].is_object(), "{v}");
    assert!(v["stats"]["gro_cpu"].is_null(), "{v}");
    // The GRO path: threaded NAPI on the TAP, its thread and the driver on one CPU.
    let v = c.json("wire srpic", &["--lab", &wired, "--seconds", "1", "--gro"]);
    assert!(v["stats"]["gro_cpu"].is_u64(), "{v}");
    // `wire down NAME`: the older spelling of --lab, still accepted.
    c.json("wire down", &[&wired]);

    // The cgroup binder.
    let root = cgroup2_root().unwrap_or_else(|| {
        testkit::missing("a cgroup v2 hierarchy (mount -t cgroup2 none /sys/fs/cgroup)")
    });
    let cg = Cgroup(root.join(lab::unique_name("steer-cli-walk-")));
    std::fs::create_dir(&cg.0).unwrap();
    let cgroup = cg.0.to_str().unwrap();
    let to = [
        "--to",
        "127.0.0.1:5201",
        "--from",
        "127.0.0.1",
        "--config",
        cfg,
    ];
    let v = c.json("attach", &[&["--cgroup", cgroup][..], &to[..]].concat());
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v}");
    let v = c.json("attach", &["--cgroup", cgroup]);
    assert_eq!(v["destinations"], 1, "{v}");
    let v = c.json("attach", &["--cgroup", cgroup, "--detach"]);
    assert_eq!(v["detached"], true, "{v}");

    // The experiments and the live load balancer, each as small as it goes;
    // each builds and removes its own lab.
    let demo_lab = lab::unique_name("cwd");
    let _down_demo = LabDown(demo_lab.clone());
    let small = ["--repetitions", "1", "--seconds", "1"];
    let v = c.json(
        "demo",
        &[
            &small[..],
            &["--flows", "2", "--queues", "2", "--lab", &demo_lab][..],
        ]
        .concat(),
    );
    assert!(v["ways"].is_array(), "{v}");
    let v = c.json(
        "exp xdp-overhead",
        &[&small[..], &["--flows", "1", "--queues", "2"][..]].concat(),
    );
    assert!(v.is_object(), "{v}");
    let live = [
        "--seconds",
        "1",
        "--policy",
        "rr",
        "--backends",
        "2",
        "--queues",
        "2",
    ];
    let v = c.json(
        "exp crossrss",
        &[&["--repetitions", "1"][..], &live[..]].concat(),
    );
    assert!(v["policies"].is_array(), "{v}");
    let v = c.json("lb run", &live);
    assert!(v["policies"].is_array(), "{v}");
    let v = c.json(
        "exp srpic",
        &[
            &small[..],
            &[
                "--flows",
                "1",
                "--spreads",
                "0.1",
                "--drops",
                "--senders",
                "static",
                "--gro",
                "off",
            ][..],
        ]
        .concat(),
    );
    assert!(v.is_object(), "{v}");
    let v = c.json(
        "exp toe",
        &["--repetitions", "1", "--bytes", "1048576", "--rpcs", "50"],
    );
    assert_eq!(v["byte_exact"], true, "{v}");
    let v = c.json(
        "exp ooo",
        &[
            "--repetitions",
            "1",
            "--seconds",
            "1",
            "--bounds",
            "0,unbounded",
        ],
    );
    assert_eq!(v["byte_exact"], true, "{v}");
    assert_eq!(v["bounds"][1]["bound"], "unbounded", "{v}");
    assert_eq!(v["senders"][1]["sender"], "dctcp", "{v}");
    assert_eq!(v["senders"][1]["byte_exact"], true, "{v}");
    let v = c.json(
        "exp loss",
        &[
            "--loss",
            "1",
            "--model",
            "uniform",
            "--rtt",
            "2",
            "--rate",
            "1gbit",
            "--engine",
            "toe",
            "--direction",
            "send",
            "--seconds",
            "1",
            "--repetitions",
            "1",
        ],
    );
    assert_eq!(v["byte_exact"], true, "{v}");
    assert_eq!(v["cells"][0]["id"], "send,reno,1%,2ms,1gbit,toe", "{v}");
    let v = c.json(
        "exp apps",
        &[
            "--workload",
            "memcached",
            "--engine",
            "toe",
            "--seconds",
            "1",
            "--repetitions",
            "1",
        ],
    );
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["cells"][1]["id"], "memcached,toe", "{v}");

    c.all_of(Json::Root);
}

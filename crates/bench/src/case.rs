//! Declared test cases and their expansion into a matrix.
//!
//! A case is declared once (in `cases.toml`, built in, or in a user's file
//! passed with `--cases`) as a command line with `{placeholders}`, a table of
//! parameters whose cross product is the matrix, the metrics to read from
//! the command's JSON (a JSON pointer, a unit, which direction is better)
//! and checks that decide PASS or FAIL. See docs/bench.md.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::BenchError;

/// The cases that ship with Steer: one `[[case]]` block per experiment or benchmark.
pub const BUILTIN_CASES: &str = include_str!("../cases.toml");

/// A file of case declarations (`[[case]]` tables).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    #[serde(default, rename = "case")]
    pub cases: Vec<CaseSpec>,
}

/// One declared case, before expansion.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    /// Short name, first part of every case id (`demo`, `xdp-overhead`).
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Program and arguments. `{steer}` is the running `steer` binary,
    /// `{root}` the directory the run starts in, `{PARAM}` a parameter value.
    pub command: Vec<String>,
    /// Arguments appended with `--quick` (usually `["--quick"]`).
    #[serde(default)]
    pub quick_args: Vec<String>,
    /// A different command line for `--quick` (instead of `quick_args`).
    #[serde(default)]
    pub quick_command: Option<Vec<String>>,
    /// Parameter name -> values; the matrix is their cross product.
    #[serde(default)]
    pub params: BTreeMap<String, Vec<Value>>,
    /// Seconds before the case is killed (TIMEOUT).
    #[serde(default = "default_timeout")]
    pub timeout: u64,
    /// Timeout for the quick variant; `timeout` when absent.
    #[serde(default)]
    pub quick_timeout: Option<u64>,
    #[serde(default)]
    pub requires: Requires,
    /// Values read from the JSON output; each must be present (else NOVALUE).
    #[serde(default)]
    pub metrics: Vec<MetricSpec>,
    /// Conditions on the JSON output; a false one makes the case FAIL.
    #[serde(default)]
    pub checks: Vec<CheckSpec>,
}

fn default_timeout() -> u64 {
    600
}

/// Preconditions; a missing one makes the case NORUN (with the reason).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    /// Needs euid 0.
    #[serde(default)]
    pub root: bool,
    /// Programs that must be on PATH.
    #[serde(default)]
    pub programs: Vec<String>,
    /// Files that must exist (relative to the run directory).
    #[serde(default)]
    pub files: Vec<String>,
    /// A `steer` subcommand that must exist, e.g. `["lb", "sim"]` (checked
    /// with `steer lb sim --help`): lets a case be declared before its command lands.
    #[serde(default)]
    pub steer_command: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
    /// Informational: changes are shown, never judged.
    None,
}

/// A number (or array of numbers) in the output.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    pub name: String,
    /// JSON pointer (RFC 6901), plus `key=value` segments that pick the
    /// array element whose `key` equals `value` (`/ways/name=random/perfect_fraction`).
    pub pointer: String,
    #[serde(default)]
    pub unit: String,
    pub better: Better,
}

/// `pointer op value` or `pointer op same_as`, e.g. `/ratio > 0`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    pub pointer: String,
    /// One of `==`, `!=`, `<`, `<=`, `>`, `>=`, `exists`.
    pub op: String,
    #[serde(default)]
    pub value: Option<Value>,
    /// Compare with the value at this other pointer instead of `value`.
    #[serde(default)]
    pub same_as: Option<String>,
    /// Only in the cells of the matrix whose parameters have one of these
    /// values (`when = { flows = [16, 30] }`): a check that is meaningful
    /// for some parameters only (with one flow, random ports are
    /// necessarily collision-free).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub when: BTreeMap<String, Vec<Value>>,
    /// What the check means, for the report.
    #[serde(default)]
    pub about: String,
}

/// Why a check did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckFailure {
    /// A value it reads is missing or null (not measured): NOVALUE.
    Absent(String),
    /// The values are there and the condition is false: FAIL.
    False(String),
}

impl std::fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckFailure::Absent(why) | CheckFailure::False(why) => f.write_str(why),
        }
    }
}

/// One cell of the matrix: a spec with every parameter fixed.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// `name/param=value/...` (parameters in name order); unique in a run.
    pub id: String,
    pub spec: CaseSpec,
    pub params: BTreeMap<String, String>,
}

impl CaseFile {
    pub fn parse(text: &str, origin: &str) -> Result<CaseFile, BenchError> {
        let file: CaseFile = toml::from_str(text).map_err(|e| BenchError::CaseFile {
            path: origin.into(),
            reason: e.to_string().replace('\n', " "),
        })?;
        for spec in &file.cases {
            spec.validate()?;
        }
        Ok(file)
    }

    pub fn load(path: &Path) -> Result<CaseFile, BenchError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| BenchError::io(format!("read {}", path.display()), e))?;
        Self::parse(&text, &path.display().to_string())
    }

    pub fn builtin() -> Result<CaseFile, BenchError> {
        Self::parse(BUILTIN_CASES, "built-in cases.toml")
    }
}

impl CaseSpec {
    fn validate(&self) -> Result<(), BenchError> {
        let bad = |reason: String| {
            Err(BenchError::Case {
                case: self.name.clone(),
                reason,
            })
        };
        if self.name.is_empty() || self.name.contains(['/', '=', ',', ' ']) {
            return bad("a name is non-empty, without '/', '=', ',' or spaces".into());
        }
        if self.command.is_empty() || self.quick_command.as_ref().is_some_and(Vec::is_empty) {
            return bad("empty command".into());
        }
        for (k, values) in &self.params {
            if values.is_empty() {
                return bad(format!("parameter '{k}' has no values"));
            }
            if matches!(k.as_str(), "steer" | "root") {
                return bad(format!("parameter name '{k}' is reserved"));
            }
        }
        let quick = self.quick_command.iter().flatten();
        let files = self.requires.files.iter();
        for arg in self
            .command
            .iter()
            .chain(&self.quick_args)
            .chain(quick)
            .chain(files)
        {
            for p in placeholders(arg) {
                if !["steer", "root", "traces"].contains(&p.as_str())
                    && !self.params.contains_key(&p)
                {
                    return bad(format!("unknown placeholder {{{p}}} in '{arg}'"));
                }
            }
        }
        for c in &self.checks {
            let known = ["==", "!=", "<", "<=", ">", ">=", "exists"];
            if !known.contains(&c.op.as_str()) {
                return bad(format!("check op '{}' is not one of {known:?}", c.op));
            }
            if c.op != "exists" && c.value.is_none() == c.same_as.is_none() {
                return bad(format!(
                    "check on {} needs exactly one of value, same_as",
                    c.pointer
                ));
            }
            for (k, values) in &c.when {
                let Some(declared) = self.params.get(k) else {
                    return bad(format!(
                        "check on {}: `when` names '{k}', which is not a parameter",
                        c.pointer
                    ));
                };
                let declared: Vec<String> = declared.iter().map(value_text).collect();
                if let Some(v) = values.iter().find(|v| !declared.contains(&value_text(v))) {
                    return bad(format!(
                        "check on {}: `when` {k} = {v}, which is not one of its values",
                        c.pointer
                    ));
                }
            }
        }
        if self.timeout == 0 || self.quick_timeout == Some(0) {
            return bad("timeout must be at least 1 second".into());
        }
        Ok(())
    }

    /// The cross product of the parameters, in a stable order.
    pub fn expand(&self) -> Vec<Case> {
        let mut combos: Vec<BTreeMap<String, String>> = vec![BTreeMap::new()];
        for (k, values) in &self.params {
            let mut next = Vec::new();
            for combo in &combos {
                for v in values {
                    let mut c = combo.clone();
                    c.insert(k.clone(), value_text(v));
                    next.push(c);
                }
            }
            combos = next;
        }
        combos
            .into_iter()
            .map(|params| {
                let mut id = self.name.clone();
                for (k, v) in &params {
                    id.push_str(&format!("/{k}={v}"));
                }
                Case {
                    id,
                    spec: self.clone(),
                    params,
                }
            })
            .collect()
    }
}

/// A case as `steer bench list --json` shows it, with its command line
/// for the given binary and directory (fields in name order, as before).
#[derive(Debug, Serialize)]
pub struct Listing<'a> {
    pub case_id: &'a str,
    pub checks: &'a [CheckSpec],
    pub command: Vec<String>,
    pub metrics: &'a [MetricSpec],
    pub name: &'a str,
    pub params: &'a BTreeMap<String, String>,
    pub requires: &'a Requires,
    pub timeout: u64,
}

impl Case {
    /// This case listed for a run (`quick` or not) of `steer` in `root`.
    pub fn listing(&self, quick: bool, steer: &str, root: &str) -> Listing<'_> {
        Listing {
            case_id: &self.id,
            checks: &self.spec.checks,
            command: self.argv(quick, steer, root),
            metrics: &self.spec.metrics,
            name: &self.spec.name,
            params: &self.params,
            requires: &self.spec.requires,
            timeout: self.timeout(quick),
        }
    }

    /// The argv to run, placeholders filled in.
    pub fn argv(&self, quick: bool, steer: &str, root: &str) -> Vec<String> {
        let args: Vec<&String> = match (quick, &self.spec.quick_command) {
            (true, Some(cmd)) => cmd.iter().collect(),
            (true, None) => self
                .spec
                .command
                .iter()
                .chain(&self.spec.quick_args)
                .collect(),
            (false, _) => self.spec.command.iter().collect(),
        };
        args.into_iter()
            .map(|a| self.fill(a, steer, root))
            .collect()
    }

    /// `arg` with `{steer}`, `{root}`, `{traces}` and the parameters filled in.
    pub fn fill(&self, arg: &str, steer: &str, root: &str) -> String {
        let mut out = arg
            .replace("{steer}", steer)
            .replace("{traces}", &traces_dir(root))
            .replace("{root}", root);
        for (k, v) in &self.params {
            out = out.replace(&format!("{{{k}}}"), v);
        }
        out
    }

    /// The checks that apply to this cell (their `when` matches its
    /// parameters).
    pub fn checks(&self) -> impl Iterator<Item = &CheckSpec> {
        self.spec.checks.iter().filter(|c| {
            c.when.iter().all(|(k, values)| {
                self.params
                    .get(k)
                    .is_some_and(|p| values.iter().any(|v| value_text(v) == *p))
            })
        })
    }

    pub fn timeout(&self, quick: bool) -> u64 {
        match (quick, self.spec.quick_timeout) {
            (true, Some(t)) => t,
            _ => self.spec.timeout,
        }
    }
}

/// Where the shared packet captures are: `$STEER_TRACES`, else `ROOT/traces`,
/// else `ROOT/../shared/traces` (the captures are public but not ours to
/// redistribute, so the repository does not carry them; docs/bench.md).
pub fn traces_dir(root: &str) -> String {
    if let Ok(dir) = std::env::var("STEER_TRACES") {
        return dir;
    }
    let inside = std::path::Path::new(root).join("traces");
    if inside.is_dir() {
        return inside.display().to_string();
    }
    std::path::Path::new(root)
        .join("../shared/traces")
        .display()
        .to_string()
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The `{name}` placeholders in `arg`.
fn placeholders(arg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let name = &rest[start + 1..start + len];
        if !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
        {
            out.push(name.to_string());
        }
        rest = &rest[start + len + 1..];
    }
    out
}

/// All cases: built-ins then `extra` files, expanded; ids must be unique.
pub fn load_matrix(extra: &[&Path], builtin: bool) -> Result<Vec<Case>, BenchError> {
    let mut files = Vec::new();
    if builtin {
        files.push(CaseFile::builtin()?);
    }
    for path in extra {
        files.push(CaseFile::load(path)?);
    }
    let mut cases: Vec<Case> = Vec::new();
    for file in files {
        for spec in &file.cases {
            for case in spec.expand() {
                if cases.iter().any(|c| c.id == case.id) {
                    return Err(BenchError::Case {
                        case: case.id,
                        reason: "declared twice".into(),
                    });
                }
                cases.push(case);
            }
        }
    }
    Ok(cases)
}

/// `--filter`: comma-separated patterns; a case runs when its id matches
/// any. `*` matches any run of characters; a pattern without `*` matches
/// ids containing it (`demo/flows=16`, `xdp-overhead*`, `*streams=4`).
pub fn matches_filter(id: &str, filter: &str) -> bool {
    filter
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .any(|p| {
            if p.contains('*') {
                glob_match(p.as_bytes(), id.as_bytes())
            } else {
                id.contains(p)
            }
        })
}

fn glob_match(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| glob_match(rest, &s[i..])),
        Some((c, rest)) => s.first() == Some(c) && glob_match(rest, &s[1..]),
    }
}

/// Resolves a JSON pointer with `key=value` selector segments.
pub fn lookup<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() {
        return Some(root);
    }
    let mut cur = root;
    for raw in pointer.strip_prefix('/')?.split('/') {
        let seg = raw.replace("~1", "/").replace("~0", "~");
        cur = match cur {
            Value::Object(map) => map.get(&seg)?,
            Value::Array(items) => match seg.split_once('=') {
                Some((key, want)) => items
                    .iter()
                    .find(|item| item.get(key).map(value_text).as_deref() == Some(want))?,
                None => items.get(seg.parse::<usize>().ok()?)?,
            },
            _ => return None,
        };
    }
    Some(cur)
}

/// The numbers at a metric's pointer: a number, or an array of numbers.
pub fn metric_values(root: &Value, pointer: &str) -> Option<Vec<f64>> {
    match lookup(root, pointer)? {
        Value::Number(n) => n.as_f64().map(|x| vec![x]),
        Value::Bool(b) => Some(vec![if *b { 1.0 } else { 0.0 }]),
        Value::Array(items) if !items.is_empty() => items.iter().map(Value::as_f64).collect(),
        _ => None,
    }
}

/// True when `v` is null or holds a null anywhere: a value with an absent
/// part was not (wholly) measured.
fn has_null(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(items) => items.iter().any(has_null),
        Value::Object(map) => map.values().any(has_null),
        _ => false,
    }
}

/// The value at `pointer`, or why it is absent (missing, or null: not
/// measured).
fn present<'a>(root: &'a Value, pointer: &str) -> Result<&'a Value, CheckFailure> {
    match lookup(root, pointer) {
        None => Err(CheckFailure::Absent(format!("{pointer} is missing"))),
        Some(v) if has_null(v) => Err(CheckFailure::Absent(format!(
            "{pointer} is {} (not measured)",
            short(v)
        ))),
        Some(v) => Ok(v),
    }
}

impl CheckSpec {
    /// `Ok(())` when true. A value the check reads that is missing or null
    /// is [`CheckFailure::Absent`]: an unmeasured value never passes, not
    /// even `null == null`.
    pub fn evaluate(&self, root: &Value) -> Result<(), CheckFailure> {
        let got = present(root, &self.pointer)?;
        if self.op == "exists" {
            return Ok(());
        }
        let want = match (&self.value, &self.same_as) {
            (Some(v), _) => v,
            (None, Some(p)) => present(root, p)?,
            (None, None) => return Err(CheckFailure::False("check has no value".into())),
        };
        let ok = match (got.as_f64(), want.as_f64()) {
            (Some(a), Some(b)) => match self.op.as_str() {
                "==" => a == b,
                "!=" => a != b,
                "<" => a < b,
                "<=" => a <= b,
                ">" => a > b,
                ">=" => a >= b,
                _ => false,
            },
            _ => match self.op.as_str() {
                "==" => got == want,
                "!=" => got != want,
                _ => false,
            },
        };
        if ok {
            Ok(())
        } else {
            let want_text = match &self.same_as {
                Some(p) => format!("{p} ({})", short(want)),
                None => short(want),
            };
            Err(CheckFailure::False(format!(
                "{} {} {want_text} is false (got {})",
                self.pointer,
                self.op,
                short(got)
            )))
        }
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!(
            "{}...",
            &s[..s.char_indices().nth(57).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtin_cases_parse_and_expand_to_unique_ids() {
        let cases = load_matrix(&[], true).unwrap();
        assert!(cases.iter().any(|c| c.id == "demo/flows=16/queues=32"));
        assert!(cases.iter().any(|c| c.id.starts_with("xdp-overhead/")));
        let argv = cases
            .iter()
            .find(|c| c.id == "demo/flows=16/queues=32")
            .unwrap()
            .argv(true, "/bin/steer", "/r");
        assert_eq!(argv[0], "/bin/steer");
        assert!(argv.contains(&"16".to_string()));
        assert_eq!(argv.last().unwrap(), "--quick");
    }

    #[test]
    fn a_listing_is_the_case_with_its_quick_or_full_command() {
        let cases = load_matrix(&[], true).unwrap();
        let demo = cases
            .iter()
            .find(|c| c.id == "demo/flows=16/queues=32")
            .unwrap();
        let quick = serde_json::to_value(demo.listing(true, "/bin/steer", "/r")).unwrap();
        assert_eq!(quick["case_id"], "demo/flows=16/queues=32");
        assert_eq!(quick["name"], "demo");
        assert_eq!(quick["params"]["flows"], "16");
        assert_eq!(quick["command"], json!(demo.argv(true, "/bin/steer", "/r")));
        assert_eq!(quick["timeout"], demo.timeout(true));
        let full = serde_json::to_value(demo.listing(false, "/bin/steer", "/r")).unwrap();
        assert_eq!(full["timeout"], demo.timeout(false));
        assert_ne!(quick["command"], full["command"]);
    }

    #[test]
    fn builtin_demo_states_random_collisions_only_where_meaningful() {
        let cases = load_matrix(&[], true).unwrap();
        let random_check = |id: &str| {
            cases
                .iter()
                .find(|c| c.id == id)
                .unwrap()
                .checks()
                .any(|c| c.pointer == "/ways/name=random/perfect_fraction")
        };
        assert!(!random_check("demo/flows=1/queues=32"));
        assert!(!random_check("demo/flows=10/queues=32"));
        assert!(random_check("demo/flows=16/queues=32"));
        assert!(random_check("demo/flows=30/queues=32"));
    }

    /// The built-in case `id`.
    fn builtin(id: &str) -> Case {
        load_matrix(&[], true)
            .unwrap()
            .into_iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no built-in case {id}"))
    }

    /// The outcome of each of `case`'s checks whose pointer starts with
    /// `under`, on `json`.
    fn judged(case: &Case, under: &str, json: &Value) -> Vec<Result<(), CheckFailure>> {
        let out: Vec<_> = case
            .checks()
            .filter(|c| c.pointer.starts_with(under))
            .map(|c| c.evaluate(json))
            .collect();
        assert!(!out.is_empty(), "{} checks nothing under {under}", case.id);
        out
    }

    fn all_pass(outcomes: &[Result<(), CheckFailure>]) -> bool {
        outcomes.iter().all(Result::is_ok)
    }

    fn one_false(outcomes: &[Result<(), CheckFailure>]) -> bool {
        outcomes
            .iter()
            .any(|r| matches!(r, Err(CheckFailure::False(_))))
    }

    /// ooo's NewReno sender did not negotiate ECN: a run whose NewReno
    /// frames reached the bottleneck ECN-capable fails (the check it
    /// replaced read CE marks of a bottleneck that never marked them).
    #[test]
    fn ooo_fails_a_new_reno_sender_whose_frames_were_ecn_capable() {
        let case = builtin("ooo");
        let run = |capable: u64| {
            json!({"senders": [
                {"sender": "new_reno", "wire_ecn_capable": capable},
                {"sender": "dctcp", "wire_ecn_capable": 1000},
            ]})
        };
        let under = "/senders/sender=new_reno/wire_ecn_capable";
        assert!(all_pass(&judged(&case, under, &run(0))));
        assert!(one_false(&judged(&case, under, &run(5))));
    }

    /// toe fails a run with an incomplete input-locking cell and one whose
    /// ablation echoed other bytes (exp's tests show the summaries say so).
    #[test]
    fn toe_fails_an_incomplete_locking_run_and_an_echo_that_differs() {
        let case = builtin("toe");
        for under in ["/locking_complete", "/byte_exact"] {
            let key = &under[1..];
            assert!(
                all_pass(&judged(&case, under, &json!({ key: true }))),
                "{under}"
            );
            assert!(
                one_false(&judged(&case, under, &json!({ key: false }))),
                "{under}"
            );
        }
    }

    /// toe's ablation scales with the host: a run whose largest layout used
    /// fewer threads than the CPUs present fails (the fixed layouts stopped
    /// at 2 threads whatever the host had), and the layouts are found by
    /// their step, not by an index that depends on the CPU count.
    #[test]
    fn toe_fails_an_ablation_that_left_cpus_unused() {
        let case = builtin("toe");
        let run = |threads: u64, cores: u64| json!({"ablation_threads": threads, "meta": {"cores": cores}});
        let under = "/ablation_threads";
        assert!(all_pass(&judged(&case, under, &run(2, 2))));
        assert!(all_pass(&judged(&case, under, &run(8, 2))));
        assert!(one_false(&judged(&case, under, &run(2, 16))));
        let rows = json!({"ablation": [
            {"step": "run_to_completion", "rpcs": 5},
            {"step": "pipelining", "rpcs": 5},
            {"step": "replication", "rpcs": 5},
            {"step": "flow_groups", "rpcs": 0},
            {"step": "flow_groups", "rpcs": 5},
        ]});
        assert!(one_false(&judged(&case, "/ablation/step=", &rows)));
    }

    #[test]
    fn no_builtin_check_is_one_a_failed_run_never_reaches() {
        // A failed repetition aborts every experiment (NOEXIT), so a count
        // of repetitions measured is true whenever it is read.
        for case in load_matrix(&[], true).unwrap() {
            for c in case.checks() {
                assert_ne!(
                    c.same_as.as_deref(),
                    Some("/params/repetitions"),
                    "{}: {} cannot fail",
                    case.id,
                    c.pointer
                );
            }
        }
        // srpic fails a cell without goodput; lb-live exits 1 on a broken
        // connection.
        let srpic = builtin("srpic/streams=1,5,10");
        assert!(!srpic.checks().any(|c| c.pointer.contains("/mbit_per_s/")));
        assert!(!builtin("lb-live")
            .checks()
            .any(|c| c.pointer == "/failures"));
    }

    #[test]
    fn xdp_overhead_fails_a_software_rss_under_the_ratio_floors() {
        for streams in [1, 4, 10] {
            let case = builtin(&format!("xdp-overhead/streams={streams}"));
            let judge = |ratio: f64, to_rps: f64| {
                judged(
                    &case,
                    "/ratio",
                    &json!({"ratio": ratio, "ratio_to_rps": to_rps}),
                )
            };
            // The lowest quick ratios measured (0.58, 0.55) pass.
            assert!(all_pass(&judge(0.58, 0.55)), "{streams}");
            // A quarter of either baseline's throughput: `ratio > 0` passed it.
            assert!(one_false(&judge(0.25, 0.6)), "{streams}");
            assert!(one_false(&judge(0.6, 0.25)), "{streams}");
            // Nothing flowed without the program: no ratio, never a pass.
            let none = judged(
                &case,
                "/ratio",
                &json!({"ratio": null, "ratio_to_rps": 0.6}),
            );
            assert!(none
                .iter()
                .any(|r| matches!(r, Err(CheckFailure::Absent(_)))));
        }
    }

    #[test]
    fn lb_live_judges_crossrss_plus_against_round_robin_of_the_run() {
        let case = builtin("lb-live");
        assert!(case
            .argv(true, "steer", "/r")
            .contains(&"--workers".to_string()));
        let judge = |vs_rr: Option<f64>| {
            judged(
                &case,
                "/policies/name=crossrss-plus/core_variance_vs_rr",
                &json!({"policies": [{"name": "crossrss-plus", "core_variance_vs_rr": vs_rr}]}),
            )
        };
        // The worst measured (1.24, during a build) passes; a controller
        // as bad as the worst hashing run (2.06) fails, as does no ratio.
        assert!(all_pass(&judge(Some(1.24))));
        assert!(one_false(&judge(Some(2.06))));
        assert!(!all_pass(&judge(None)));
    }

    #[test]
    fn matrix_is_the_cross_product() {
        let file = CaseFile::parse(
            r#"[[case]]
name = "x"
command = ["echo", "{a}", "{b}"]
params = { a = [1, 2], b = ["u", "v", "w"] }
"#,
            "t",
        )
        .unwrap();
        let cases = file.cases[0].expand();
        assert_eq!(cases.len(), 6);
        assert_eq!(cases[0].id, "x/a=1/b=u");
        assert_eq!(cases[5].argv(false, "s", "r"), ["echo", "2", "w"]);
    }

    #[test]
    fn bad_declarations_are_refused() {
        for text in [
            "[[case]]\nname = \"a b\"\ncommand = [\"x\"]",
            "[[case]]\nname = \"a\"\ncommand = []",
            "[[case]]\nname = \"a\"\ncommand = [\"{nope}\"]",
            "[[case]]\nname = \"a\"\ncommand = [\"x\"]\nchecks = [{pointer = \"/a\", op = \"~\", value = 1}]",
            "[[case]]\nname = \"a\"\ncommand = [\"x\"]\nbogus = 1",
            "[[case]\n",
        ] {
            assert!(CaseFile::parse(text, "t").is_err(), "{text}");
        }
    }

    #[test]
    fn filter_patterns() {
        assert!(matches_filter("demo/flows=16/queues=32", "flows=16"));
        assert!(matches_filter("demo/flows=16/queues=32", "lb*,demo/*=32"));
        assert!(!matches_filter("demo/flows=16/queues=32", "xdp*"));
        assert!(!matches_filter("demo/flows=1/queues=32", "demo/flows=16*"));
    }

    #[test]
    fn pointers_with_selectors() {
        let v = json!({"ways": [{"name": "random", "p": 0.5}, {"name": "bpf", "p": 1.0, "xs": [1, 2]}],
                       "a/b": 3});
        assert_eq!(lookup(&v, "/ways/name=bpf/p"), Some(&json!(1.0)));
        assert_eq!(lookup(&v, "/ways/0/p"), Some(&json!(0.5)));
        assert_eq!(lookup(&v, "/a~1b"), Some(&json!(3)));
        assert_eq!(lookup(&v, "/ways/name=none/p"), None);
        assert_eq!(metric_values(&v, "/ways/1/xs"), Some(vec![1.0, 2.0]));
        assert_eq!(metric_values(&v, "/ways"), None);
    }

    #[test]
    fn checks() {
        let v = json!({"r": 0.75, "q": [1, 2], "p": [1, 2], "s": "x"});
        let c = check;
        assert!(c(">", Some(json!(0)), None, "/r").evaluate(&v).is_ok());
        assert!(c("<", Some(json!(0.5)), None, "/r").evaluate(&v).is_err());
        assert!(c("==", None, Some("/p"), "/q").evaluate(&v).is_ok());
        assert!(c("==", Some(json!("x")), None, "/s").evaluate(&v).is_ok());
        assert!(c("exists", None, None, "/zz").evaluate(&v).is_err());
    }

    fn check(op: &str, value: Option<Value>, same_as: Option<&str>, ptr: &str) -> CheckSpec {
        CheckSpec {
            pointer: ptr.into(),
            op: op.into(),
            value,
            same_as: same_as.map(Into::into),
            when: BTreeMap::new(),
            about: String::new(),
        }
    }

    #[test]
    fn null_or_missing_values_never_pass() {
        let v = json!({"r": null, "q": [1, null], "p": [1, null], "n": 0.5,
                       "ways": [{"name": "bpf", "f": null}]});
        let absent = |c: CheckSpec| match c.evaluate(&v) {
            Err(CheckFailure::Absent(why)) => why,
            other => panic!("{} {}: expected absent, got {other:?}", c.pointer, c.op),
        };
        // Every op on a null, on a missing pointer, on a selector that finds nothing.
        for op in ["==", "!=", "<", "<=", ">", ">="] {
            absent(check(op, Some(json!(1)), None, "/r"));
            absent(check(op, Some(json!(1)), None, "/zz"));
            absent(check(op, Some(json!(1)), None, "/ways/name=bpf/f"));
            absent(check(op, Some(json!(1)), None, "/ways/name=none/f"));
        }
        assert!(absent(check("exists", None, None, "/r")).contains("not measured"));
        // null == null is not a pass; neither is an array with a null in it.
        absent(check("==", Some(Value::Null), None, "/r"));
        absent(check("==", None, Some("/r"), "/r"));
        absent(check("==", None, Some("/p"), "/q"));
        // The other side absent: absent too.
        absent(check("<", None, Some("/r"), "/n"));
        absent(check("<", None, Some("/zz"), "/n"));
        // Present and false is FAIL, not absent.
        assert!(matches!(
            check(">", Some(json!(1)), None, "/n").evaluate(&v),
            Err(CheckFailure::False(_))
        ));
    }

    #[test]
    fn when_limits_a_check_to_some_parameters() {
        let file = CaseFile::parse(
            r#"[[case]]
name = "x"
command = ["echo", "{flows}"]
params = { flows = [1, 16], queues = [32] }
checks = [
  { pointer = "/a", op = "exists" },
  { pointer = "/b", op = "<", value = 1, when = { flows = [16] } },
]
"#,
            "t",
        )
        .unwrap();
        let cases = file.cases[0].expand();
        let ptrs = |c: &Case| c.checks().map(|c| c.pointer.clone()).collect::<Vec<_>>();
        assert_eq!(ptrs(&cases[0]), ["/a"]);
        assert_eq!(ptrs(&cases[1]), ["/a", "/b"]);
        for text in [
            // not a parameter
            "[[case]]\nname = \"a\"\ncommand = [\"x\"]\nchecks = [{pointer = \"/a\", op = \"exists\", when = {n = [1]}}]",
            // not one of its values
            "[[case]]\nname = \"a\"\ncommand = [\"{n}\"]\nparams = {n = [1]}\nchecks = [{pointer = \"/a\", op = \"exists\", when = {n = [2]}}]",
        ] {
            assert!(CaseFile::parse(text, "t").is_err(), "{text}");
        }
    }
}

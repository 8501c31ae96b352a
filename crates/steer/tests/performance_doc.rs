//! docs/performance.md cites only clean commits (issue 27, "Counters and
//! provenance"): a number there names the commit whose code made it, and
//! only when that code was the commit's, not a tree with changes on top.
//!
//! What the text can show is checked:
//!
//! - A commit is cited as `commit HASH` (`commits A and B`, `commits A, B`,
//!   `git checkout HASH`), and every cited hash is a commit of this
//!   repository's history (an ancestor of HEAD): a hash of an amended or
//!   rebased-away commit, or a typo, names no code anyone can check out.
//! - A hash of this repository appears nowhere else: "commit after X",
//!   "X plus changes" or `X-dirty` describe a tree that is no commit, so a
//!   result from such a tree says so in words and names no commit.
//! - Every result JSON the doc quotes (`docs/data/*.json`) names a commit
//!   of the history and says its tree was clean (`meta.git_dirty` false,
//!   stats::Meta). A result older than that record has no `git_dirty`; it
//!   is held to its commit alone, and none newer may lack it.
//!
//! Whether a number in prose came from a clean tree cannot be read from
//! the prose: results name it in their JSON, which is why numbers come
//! from such files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `git ARGS` in the repository: its stdout. A missing git, or a history
/// it cannot read, is a missing prerequisite.
fn git(args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut child = Command::new("git")
        .current_dir(repository())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| testkit::missing(&format!("the program git ({e})")));
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    if !out.status.success() {
        testkit::missing(&format!(
            "the repository's git history (git {}: {})",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout).unwrap()
}

/// Every commit of HEAD's history, full hashes. A shallow clone lacks the
/// older ones, which the doc cites: that is a missing prerequisite, not a
/// bad citation.
fn history() -> BTreeSet<String> {
    if git(&["rev-parse", "--is-shallow-repository"], None).trim() == "true" {
        testkit::missing("the repository's whole history (a shallow clone): git fetch --unshallow");
    }
    git(&["rev-list", "HEAD"], None)
        .lines()
        .map(str::to_string)
        .collect()
}

/// What each of `revs` names in this repository: its full hash when it is
/// a commit, None when it names nothing (or something ambiguous).
fn commits_of(revs: &[&str]) -> Vec<Option<String>> {
    let input: String = revs.iter().map(|r| format!("{r}^{{commit}}\n")).collect();
    git(
        &["cat-file", "--batch-check=%(objectname) %(objecttype)"],
        Some(&input),
    )
    .lines()
    .map(|l| match l.split_once(' ') {
        Some((hash, "commit")) => Some(hash.to_string()),
        _ => None,
    })
    .collect()
}

fn is_hex(word: &str) -> bool {
    (7..=40).contains(&word.len()) && word.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A word of the doc: a maximal run of ASCII letters and digits, its byte
/// range and the text between it and the next word.
#[derive(Debug)]
struct Word<'a> {
    text: &'a str,
    start: usize,
    after: &'a str,
}

fn words(doc: &str) -> Vec<Word<'_>> {
    let bytes = doc.as_bytes();
    let mut out: Vec<Word<'_>> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
            i += 1;
        }
        let gap_end = (i..bytes.len())
            .find(|&j| bytes[j].is_ascii_alphanumeric())
            .unwrap_or(bytes.len());
        out.push(Word {
            text: &doc[start..i],
            start,
            after: &doc[i..gap_end],
        });
    }
    out
}

/// The indices of the words the doc cites as commits: the hashes right
/// after `commit`, `commits` or `checkout`, and those chained to them with
/// `and` or a comma.
fn citations(words: &[Word<'_>]) -> BTreeSet<usize> {
    let mut cited = BTreeSet::new();
    for (i, w) in words.iter().enumerate() {
        let keyword = ["commit", "commits", "checkout"].contains(&w.text.to_lowercase().as_str());
        if !keyword || !w.after.trim().is_empty() {
            continue;
        }
        let mut j = i + 1;
        while j < words.len() && is_hex(words[j].text) {
            cited.insert(j);
            let sep = words[j].after.trim();
            if sep == "," && words.get(j + 1).is_some_and(|w| is_hex(w.text)) {
                j += 1;
            } else if sep.is_empty()
                && words
                    .get(j + 1)
                    .is_some_and(|w| w.text == "and" && w.after.trim().is_empty())
                && words.get(j + 2).is_some_and(|w| is_hex(w.text))
            {
                j += 2;
            } else {
                break;
            }
        }
    }
    cited
}

/// The problems with the commits `doc` cites, one line each.
fn bad_citations(doc: &str, history: &BTreeSet<String>) -> Vec<String> {
    let words = words(doc);
    let cited = citations(&words);
    let hexes: Vec<usize> = (0..words.len())
        .filter(|&i| is_hex(words[i].text))
        .collect();
    let names: Vec<&str> = hexes.iter().map(|&i| words[i].text).collect();
    let resolved = commits_of(&names);
    let mut bad = Vec::new();
    for (&i, commit) in hexes.iter().zip(resolved) {
        let w = &words[i];
        let line = doc[..w.start].matches('\n').count() + 1;
        let at = format!("line {line}: {}", w.text);
        match (cited.contains(&i), commit) {
            (true, None) => bad.push(format!("{at} is cited as a commit but names none")),
            (true, Some(c)) if !history.contains(&c) => {
                bad.push(format!("{at} is not a commit of HEAD's history"))
            }
            (false, Some(_)) => bad.push(format!(
                "{at} names a commit but not as `commit {}`: a result from a tree with \
                 changes on a commit names no commit",
                w.text
            )),
            _ => {}
        }
        let rest = &doc[w.start + w.text.len()..];
        if cited.contains(&i) && (rest.starts_with('+') || rest.starts_with("-dirty")) {
            bad.push(format!("{at} is marked as a tree with changes"));
        }
    }
    bad
}

/// The result files `doc` quotes: `docs/data/NAME.json`.
fn quoted_results(doc: &str) -> BTreeSet<String> {
    doc.match_indices("docs/data/")
        .filter_map(|(at, _)| {
            let rest = &doc[at..];
            let end = rest.find(".json")? + ".json".len();
            let path = &rest[..end];
            path.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b))
                .then(|| path.to_string())
        })
        .collect()
}

/// The problems with result `path`'s provenance: its commit in `history`,
/// its tree clean; `recorded_since` is when results began to record
/// `git_dirty` (seconds since the epoch).
fn bad_result(
    path: &str,
    v: &serde_json::Value,
    history: &BTreeSet<String>,
    recorded_since: u64,
) -> Vec<String> {
    let meta = &v["meta"];
    let mut bad = Vec::new();
    match meta["git_commit"].as_str() {
        Some(c) => match commits_of(&[c]).pop().flatten() {
            Some(full) if history.contains(&full) => {}
            _ => bad.push(format!(
                "{path}: its commit {c} is not a commit of HEAD's history"
            )),
        },
        None => bad.push(format!("{path}: names no commit (meta.git_commit)")),
    }
    match meta.get("git_dirty") {
        Some(serde_json::Value::Bool(false)) => {}
        Some(serde_json::Value::Bool(true)) => bad.push(format!(
            "{path}: its tree had uncommitted changes ({})",
            meta["git_changes"].as_str().unwrap_or("?")
        )),
        Some(_) => bad.push(format!(
            "{path}: git could not tell whether its tree was clean"
        )),
        None => match meta["timestamp"].as_u64() {
            Some(t) if t < recorded_since => {}
            _ => bad.push(format!(
                "{path}: says nothing of its tree (meta.git_dirty), though it is newer \
                 than the record"
            )),
        },
    }
    bad
}

#[test]
fn performance_cites_only_clean_commits() {
    let doc = std::fs::read_to_string(repository().join("docs/performance.md")).unwrap();
    let history = history();
    let mut bad = bad_citations(&doc, &history);
    // When results began to say whether their tree was clean: the first
    // commit that wrote `git_dirty` into stats::Meta.
    let recorded_since: u64 = git(
        &[
            "log",
            "--reverse",
            "--format=%ct",
            "-S",
            "git_dirty",
            "--",
            "crates/stats/src/meta.rs",
        ],
        None,
    )
    .lines()
    .next()
    .and_then(|t| t.parse().ok())
    .expect("the commit that added git_dirty to stats::Meta");
    let results = quoted_results(&doc);
    assert!(
        !results.is_empty(),
        "the doc quotes no result JSON any more"
    );
    for path in results {
        let text = std::fs::read_to_string(repository().join(&path))
            .unwrap_or_else(|e| panic!("docs/performance.md quotes {path}: {e}"));
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        bad.extend(bad_result(&path, &v, &history, recorded_since));
    }
    assert!(
        bad.is_empty(),
        "docs/performance.md cites what is not a clean commit:\n{}",
        bad.join("\n")
    );
}

/// The forms the doc uses, and the ones it must not.
#[test]
fn citations_are_read_in_every_form_the_doc_uses() {
    let head = git(&["rev-parse", "HEAD"], None).trim().to_string();
    let short = &head[..7];
    let history = BTreeSet::from([head.clone()]);
    for good in [
        format!("Result, commit {short}, two runs"),
        format!("(commits {short} and {short})"),
        format!("Commit {short}, kernel"),
        format!("commits {short}, {short}"),
        format!("git checkout {short} && cargo bench"),
        "rustc 1.95.0 (59807616e 2026-04-14)".to_string(),
    ] {
        assert_eq!(
            bad_citations(&good, &history),
            Vec::<String>::new(),
            "{good}"
        );
    }
    for bad in [
        format!("kernel 6.18.44, commit after {short}:"),
        format!("measured at {short} plus changes"),
        format!("commit {short}-dirty"),
        format!("commit {short}+"),
        "commit 0000000 (a typo)".to_string(),
    ] {
        assert_eq!(bad_citations(&bad, &history).len(), 1, "{bad}");
    }
    // A commit that is not HEAD's ancestor (here: any, against an empty
    // history).
    assert_eq!(
        bad_citations(&format!("commit {short}"), &BTreeSet::new()).len(),
        1
    );
}

#[test]
fn a_quoted_result_must_say_its_tree_was_clean() {
    let head = git(&["rev-parse", "HEAD"], None).trim().to_string();
    let history = BTreeSet::from([head.clone()]);
    let result = |meta: serde_json::Value| serde_json::json!({ "meta": meta });
    let c = &head[..12];
    let ok = |m| bad_result("r.json", &result(m), &history, 1000).is_empty();
    assert!(ok(
        serde_json::json!({"git_commit": c, "git_dirty": false, "timestamp": 2000})
    ));
    assert!(!ok(
        serde_json::json!({"git_commit": c, "git_dirty": true, "git_changes": " M a.rs", "timestamp": 2000})
    ));
    assert!(!ok(
        serde_json::json!({"git_commit": c, "git_dirty": null, "timestamp": 2000})
    ));
    // Before the record a result could not say; after it, it must.
    assert!(ok(serde_json::json!({"git_commit": c, "timestamp": 999})));
    assert!(!ok(serde_json::json!({"git_commit": c, "timestamp": 2000})));
    assert!(!ok(
        serde_json::json!({"git_commit": "0000000", "git_dirty": false, "timestamp": 2000})
    ));
}

//! The arrows between the crates point down (docs/architecture.md): every
//! crate's `[dependencies]` name only crates of lower layers, no crate but
//! `steer` depends on `exp`, `bench` or `steer`, and the layer table in the
//! doc lists every crate of the workspace. The doc is the one statement of
//! the layers; this test holds the code to it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Crate name -> layer, from the "## Layers" table of docs/architecture.md;
/// `tests` (testkit) is layer `None`.
fn layers() -> BTreeMap<String, Option<u32>> {
    let doc = std::fs::read_to_string(workspace().join("docs/architecture.md")).unwrap();
    let table = doc
        .split("## Layers")
        .nth(1)
        .expect("docs/architecture.md has a '## Layers' section");
    let mut out = BTreeMap::new();
    for row in table.lines().skip_while(|l| !l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        if !row.starts_with('|') {
            break;
        }
        let (layer, crates) = (cells[1], cells[2]);
        if layer == "layer" || layer.starts_with("---") {
            continue;
        }
        let layer = (layer != "tests")
            .then(|| layer.parse::<u32>())
            .transpose()
            .unwrap_or_else(|e| panic!("layer {layer:?} in docs/architecture.md: {e}"));
        for name in crates.split(',').map(str::trim) {
            assert!(
                out.insert(name.to_string(), layer).is_none(),
                "{name} is listed twice in docs/architecture.md"
            );
        }
    }
    out
}

/// The workspace's own crates a manifest table names (path dependencies).
fn path_deps(manifest: &toml::Table, section: &str) -> Vec<String> {
    manifest
        .get(section)
        .and_then(toml::Value::as_table)
        .map(|t| {
            t.iter()
                .filter(|(_, v)| v.get("path").is_some())
                .map(|(name, _)| name.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// Every crate under crates/ with its manifest.
fn manifests() -> BTreeMap<String, toml::Table> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(workspace().join("crates")).unwrap() {
        let path = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let manifest: toml::Table = text.parse().unwrap();
        let name = manifest["package"]["name"].as_str().unwrap().to_string();
        out.insert(name, manifest);
    }
    out
}

#[test]
fn every_crate_has_a_layer_and_every_arrow_points_down() {
    let layers = layers();
    let mut wrong = Vec::new();
    for (name, manifest) in manifests() {
        let Some(&own) = layers.get(&name) else {
            wrong.push(format!(
                "{name} is not in the layer table of docs/architecture.md"
            ));
            continue;
        };
        let leaves = ["exp", "bench", "steer"];
        for section in ["dependencies", "build-dependencies"] {
            for dep in path_deps(&manifest, section) {
                // testkit (layer "tests") may use any library below the leaves.
                let down = match (own, layers.get(&dep).copied().flatten()) {
                    (Some(own), Some(theirs)) => theirs < own,
                    (None, Some(_)) => true,
                    (_, None) => false,
                };
                if !down {
                    wrong.push(format!("{name} -> {dep} ({section}) does not point down"));
                }
                if leaves.contains(&dep.as_str()) && name != "steer" {
                    wrong.push(format!("{name} -> {dep}: only the binary uses {dep}"));
                }
            }
        }
        for dep in path_deps(&manifest, "dev-dependencies") {
            if leaves.contains(&dep.as_str()) {
                wrong.push(format!("{name}'s tests use {dep}: tests never do"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_layer_table_names_only_crates_that_exist() {
    let manifests = manifests();
    let stale: Vec<String> = layers()
        .into_keys()
        .filter(|name| !manifests.contains_key(name))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/architecture.md lists crates the workspace does not have: {stale:?}"
    );
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// A source file's code before its unit tests.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The experiments' result envelope (`experiment`, `params`, `meta`) is
/// written once, in `exp::experiment` (issue 25's one experiment
/// interface): no experiment builds its own. The test matrix's wrapper of
/// criterion's estimates is bench's (bench runs below exp and never
/// imports it).
#[test]
fn experiment_envelopes_only_in_exp() {
    let home = Path::new("crates/exp/src/experiment.rs");
    let mut wrong = Vec::new();
    for krate in ["exp", "lbxdp", "steer", "toe", "lab", "wire", "lb"] {
        for path in rust_files(&workspace().join("crates").join(krate).join("src")) {
            let rel = path.strip_prefix(workspace()).unwrap().to_path_buf();
            if rel == home {
                continue;
            }
            let code = code_of(&path);
            for needle in ["experiment: &'static str", "Meta::collect()"] {
                if code.contains(needle) {
                    wrong.push(format!("{}: {needle}", rel.display()));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "envelopes outside exp::experiment:\n{}",
        wrong.join("\n")
    );
}

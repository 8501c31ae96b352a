//! Criterion's estimates as one JSON object, so criterion benchmarks are
//! matrix cases like the experiments (`steer bench criterion-json DIR`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::BenchError;

#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub median_ns: f64,
    pub mean_ns: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CriterionResults {
    pub experiment: &'static str,
    /// `group/function` -> estimates of the latest run (`new/estimates.json`).
    pub benchmarks: BTreeMap<String, Estimate>,
    pub meta: stats::Meta,
}

/// Reads every `DIR/<group>/<function>/new/estimates.json`.
pub fn collect(dir: &Path) -> Result<CriterionResults, BenchError> {
    let mut benchmarks = BTreeMap::new();
    let read_dir = |d: &Path| {
        std::fs::read_dir(d).map_err(|e| BenchError::io(format!("read {}", d.display()), e))
    };
    for group in read_dir(dir)?.flatten() {
        if !group.path().is_dir() || group.file_name() == "report" {
            continue;
        }
        for func in read_dir(&group.path())?.flatten() {
            let est = func.path().join("new").join("estimates.json");
            let Ok(text) = std::fs::read_to_string(&est) else {
                continue;
            };
            let v: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| BenchError::CaseFile {
                    path: est.display().to_string(),
                    reason: e.to_string(),
                })?;
            let point = |k: &str| v[k]["point_estimate"].as_f64();
            if let (Some(median_ns), Some(mean_ns)) = (point("median"), point("mean")) {
                let name = format!(
                    "{}/{}",
                    group.file_name().to_string_lossy(),
                    func.file_name().to_string_lossy()
                );
                benchmarks.insert(name, Estimate { median_ns, mean_ns });
            }
        }
    }
    Ok(CriterionResults {
        experiment: "criterion",
        benchmarks,
        meta: stats::Meta::collect(),
    })
}

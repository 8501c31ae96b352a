//! The lab state file under [`STATE_DIR`]: written as each namespace is
//! created, read by `open`, `status`, `down` and `list`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Host, Lab, LabError, Wire};

/// Where lab state files live.
pub const STATE_DIR: &str = "/run/steer/lab";

/// The lab state file: what was built, and so what `down` may delete.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LabState {
    pub(crate) name: String,
    pub(crate) index: u8,
    pub(crate) hosts: Vec<Host>,
    pub(crate) receiver: String,
    pub(crate) sender: String,
    /// Namespaces this lab created (deleted by `down`), in creation order.
    pub(crate) created_netns: Vec<String>,
    /// Switch namespace (more than two hosts).
    pub(crate) switch_netns: Option<String>,
    /// Set once the whole lab is up.
    pub(crate) complete: bool,
    /// The wire namespace between the two hosts, if any.
    #[serde(default)]
    pub(crate) wire: Option<Wire>,
    /// Who made it ([`crate::LabSpec::owner`]).
    #[serde(default)]
    pub(crate) owner: Option<String>,
}

pub(crate) fn state_path(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{name}.json"))
}

impl LabState {
    pub(crate) fn save(&self) -> Result<(), LabError> {
        std::fs::create_dir_all(STATE_DIR)
            .map_err(|e| LabError::io(format!("create {STATE_DIR}"), e))?;
        let path = state_path(&self.name);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| LabError::State {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        std::fs::write(&tmp, text)
            .map_err(|e| LabError::io(format!("write {}", tmp.display()), e))?;
        std::fs::rename(&tmp, &path)
            .map_err(|e| LabError::io(format!("rename to {}", path.display()), e))
    }

    pub(crate) fn load(name: &str) -> Result<Option<LabState>, LabError> {
        let path = state_path(name);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LabError::io(format!("read {}", path.display()), e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| LabError::State {
                path: path.display().to_string(),
                reason: e.to_string(),
            })
    }

    pub(crate) fn receiver(&self) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == self.receiver)
            .unwrap_or(&self.hosts[self.hosts.len() - 1])
    }
}

impl Lab {
    /// Names of the labs with a state file.
    pub fn list() -> Result<Vec<String>, LabError> {
        let dir = match std::fs::read_dir(STATE_DIR) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(LabError::io(format!("read {STATE_DIR}"), e)),
        };
        let mut names: Vec<String> = dir
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .map(str::to_string)
            })
            .collect();
        names.sort();
        Ok(names)
    }
}

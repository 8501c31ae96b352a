//! The receiver's software RSS: the config a lab attaches (crate `nic`), and
//! reading it back.

use rand::RngCore;

use crate::{Host, Lab, LabError, LabSpec};

/// Indirection table size of the default table.
pub const DEFAULT_TABLE_SIZE: usize = 128;

fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

impl Lab {
    pub(crate) fn config_for(spec: &LabSpec) -> Result<rss::RssConfig, LabError> {
        if let Some(config) = &spec.config {
            config.validate()?;
            return Ok(config.clone());
        }
        let key = match &spec.key {
            Some(k) => k.clone(),
            None => {
                let mut bytes = vec![0u8; 52];
                rand::thread_rng().fill_bytes(&mut bytes);
                rss::RssKey::new(bytes)?
            }
        };
        let table = match &spec.table {
            Some(t) => t.clone(),
            None => rss::IndirectionTable::equal(DEFAULT_TABLE_SIZE, spec.queues, 0)?,
        };
        let cpus = online_cpus();
        let config = rss::RssConfig {
            version: rss::config::CONFIG_VERSION,
            hash_function: rss::HashFunction::Toeplitz,
            key,
            input_transform: rss::InputTransform::None,
            fields: spec
                .fields
                .unwrap_or_else(rss::HashFieldsByFlow::linux_default),
            queues: spec.queues,
            indirection_table: table,
            queue_cpus: (0..spec.queues).map(|q| q % cpus).collect(),
            rps_cpus: Vec::new(),
        };
        config.validate()?;
        Ok(config)
    }

    /// The receiver's software RSS config, as applied.
    pub fn rss_config(&self) -> Result<rss::RssConfig, LabError> {
        let r = self.receiver();
        nic::attached_config(&r.dev, Some(&r.netns))?.ok_or_else(|| {
            nic::NicError::NotAttached {
                dev: r.dev.clone(),
                netns: Some(r.netns.clone()),
            }
            .into()
        })
    }
}

/// Attaches the software RSS with `config` to the receiver's device.
pub(crate) fn attach(
    receiver: &Host,
    config: &rss::RssConfig,
    track_flows: bool,
) -> Result<(), LabError> {
    nic::attach(
        &receiver.dev,
        Some(&receiver.netns),
        config,
        &nic::AttachOptions {
            track_flows,
            ..nic::AttachOptions::default()
        },
    )?;
    Ok(())
}

/// Detaches the software RSS from the receiver's device; one that is not
/// attached, or whose device or namespace is gone, is fine.
pub(crate) fn detach(receiver: &Host) -> Result<(), LabError> {
    match nic::detach(&receiver.dev, Some(&receiver.netns)) {
        Ok(())
        | Err(nic::NicError::NotAttached { .. })
        | Err(nic::NicError::NoSuchDevice { .. })
        | Err(nic::NicError::NoSuchNetns { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config given whole is the config the receiver gets: its input
    /// transform and queue -> CPU map are not replaced by defaults.
    #[test]
    fn a_given_config_is_used_as_is() {
        let mut config = rss::RssConfig::ethtool_default(rss::RssKey::microsoft(), 2, 128).unwrap();
        config.input_transform = rss::InputTransform::SymXor;
        config.queue_cpus = vec![0, 0];
        let spec = LabSpec::new("t").with_config(config.clone());
        assert_eq!(spec.queues, 2);
        assert_eq!(Lab::config_for(&spec).unwrap(), config);
    }
}

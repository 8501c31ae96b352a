//! Reading the values of one entry of a per-CPU BPF map.
//!
//! The kernel returns one value per possible CPU. A value that cannot be
//! read as the type the program writes (a size mismatch between the BPF
//! object and this build), or an array entry that is missing, means the
//! counters are unknown: summing the rest would report the lost ones as 0
//! (issue 27, "Counters and provenance").

use crate::NicError;

/// Each CPU's value of entry `key` of per-CPU map `map`, read as `T`.
/// `values` is what `lookup_percpu` returned; `None` (no entry) is an
/// error, since every map read this way is an array that has every key.
pub fn values<T: bytemuck::Pod>(
    map: &str,
    key: u32,
    values: Option<Vec<Vec<u8>>>,
) -> Result<Vec<T>, NicError> {
    let unreadable = |reason: String| NicError::MapValue {
        map: map.to_string(),
        key,
        reason,
    };
    let values = values.ok_or_else(|| unreadable("no such entry".into()))?;
    values
        .iter()
        .enumerate()
        .map(|(cpu, bytes)| {
            bytemuck::try_pod_read_unaligned::<T>(bytes).map_err(|_| {
                unreadable(format!(
                    "the value of CPU {cpu} is {} bytes, expected {}",
                    bytes.len(),
                    std::mem::size_of::<T>()
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cpu_value_is_read() {
        let got: Vec<u64> = values(
            "m",
            0,
            Some(vec![
                7u64.to_ne_bytes().to_vec(),
                5u64.to_ne_bytes().to_vec(),
            ]),
        )
        .unwrap();
        assert_eq!(got, [7, 5]);
    }

    /// The old reading skipped a value of the wrong size and summed the
    /// rest, so a mismatch read as 0.
    #[test]
    fn a_value_of_the_wrong_size_is_an_error() {
        let err = values::<u64>(
            "stats",
            3,
            Some(vec![7u64.to_ne_bytes().to_vec(), vec![0; 4]]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "BPF map stats entry 3 is unreadable: the value of CPU 1 is 4 bytes, expected 8"
        );
    }

    #[test]
    fn a_missing_entry_is_an_error() {
        let err = values::<u64>("stats", 9, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "BPF map stats entry 9 is unreadable: no such entry"
        );
    }
}

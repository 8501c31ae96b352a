//! RSS hash keys.
//!
//! A Toeplitz key must be at least 4 bytes longer than the hash input: the
//! 32-bit result for input bit `i` is the key window starting at key bit `i`.
//! NICs use 40-byte keys (enough for an IPv6 4-tuple, 36 bytes) or 52-byte keys
//! (Intel ice/iavf, and Linux's `netdev_rss_key`).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::RssError;

/// The key from Microsoft's "Verifying the RSS Hash Calculation", used by many
/// drivers as their default and by the published verification vectors.
pub const MICROSOFT_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// A Toeplitz key, any length of at least one byte. Serialized as a hex string.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RssKey(Vec<u8>);

impl RssKey {
    pub fn new(bytes: Vec<u8>) -> Result<Self, RssError> {
        if bytes.is_empty() {
            return Err(RssError::KeyEmpty);
        }
        Ok(RssKey(bytes))
    }

    /// Microsoft's 40-byte verification key.
    pub fn microsoft() -> Self {
        RssKey(MICROSOFT_KEY.to_vec())
    }

    /// The key `0x6d5a` repeated: every 16-bit window of it is the same, so the
    /// hash is unchanged when source and destination (address and port) are
    /// swapped (Woo and Park, "Scalable TCP Session Monitoring with Symmetric
    /// Receive-side Scaling", 2012).
    pub fn symmetric(len: usize) -> Self {
        RssKey(
            (0..len)
                .map(|i| if i % 2 == 0 { 0x6d } else { 0x5a })
                .collect(),
        )
    }

    /// Parses hex, with or without `:` separators (ethtool prints `6d:5a:...`).
    pub fn from_hex(text: &str) -> Result<Self, RssError> {
        let digits: String = text
            .trim()
            .trim_start_matches("0x")
            .chars()
            .filter(|c| *c != ':')
            .collect();
        let bytes = hex::decode(&digits).map_err(|e| RssError::KeyNotHex(e.to_string()))?;
        RssKey::new(bytes)
    }

    /// Parses a key as users name one (every `--key` of the project):
    /// `microsoft` ([`RssKey::microsoft`]), `symmetric`
    /// ([`RssKey::symmetric`], 40 bytes), `@FILE` (a file holding the hex,
    /// e.g. `ethtool -x` output trimmed to the key), or hex. `default` is
    /// refused: Linux drivers default to a random per-boot key that no
    /// other host can know.
    pub fn from_arg(text: &str) -> Result<Self, RssError> {
        match text {
            "default" => Err(RssError::KeyUnknowable),
            "microsoft" => Ok(RssKey::microsoft()),
            "symmetric" => Ok(RssKey::symmetric(40)),
            file if file.starts_with('@') => {
                let path = &file[1..];
                let text = std::fs::read_to_string(path).map_err(|e| RssError::Unreadable {
                    what: "RSS key",
                    path: path.to_string(),
                    kind: e.kind(),
                    reason: e.to_string(),
                })?;
                RssKey::from_hex(&text).map_err(|e| RssError::InFile {
                    path: path.to_string(),
                    source: Box::new(e),
                })
            }
            hex => RssKey::from_hex(hex),
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Fails unless the key can hash an input of `input_len` bytes.
    pub fn check_input_len(&self, input_len: usize) -> Result<(), RssError> {
        let needed = input_len + 4;
        if self.0.len() < needed {
            return Err(RssError::KeyTooShort {
                len: self.0.len(),
                input: input_len,
                needed,
            });
        }
        Ok(())
    }

    pub fn to_hex(&self) -> String {
        hex::encode(&self.0)
    }
}

impl fmt::Debug for RssKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RssKey({})", self.to_hex())
    }
}

impl fmt::Display for RssKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|b| format!("{b:02x}")).collect();
        f.write_str(&parts.join(":"))
    }
}

impl Serialize for RssKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for RssKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        RssKey::from_hex(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod arg_tests {
    use super::*;

    #[test]
    fn names_hex_and_files() {
        assert_eq!(RssKey::from_arg("microsoft").unwrap(), RssKey::microsoft());
        assert_eq!(
            RssKey::from_arg("symmetric").unwrap(),
            RssKey::symmetric(40)
        );
        assert_eq!(RssKey::from_arg("6d:5a").unwrap().as_bytes(), [0x6d, 0x5a]);
        let dir = std::env::temp_dir().join(format!("rss-key-arg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("key");
        std::fs::write(&file, "0102\n").unwrap();
        let arg = format!("@{}", file.display());
        assert_eq!(RssKey::from_arg(&arg).unwrap().as_bytes(), [1, 2]);
        std::fs::write(&file, "nothex").unwrap();
        let err = RssKey::from_arg(&arg).unwrap_err();
        assert!(matches!(err, RssError::InFile { .. }), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_keys_are_one_line_errors() {
        for (arg, needle) in [
            ("default", "random per-boot key"),
            ("zz", "not hex"),
            ("", "empty"),
            (
                "@/nonexistent/steer-key",
                "cannot read RSS key /nonexistent/steer-key",
            ),
        ] {
            let err = RssKey::from_arg(arg).unwrap_err();
            let text = err.to_string();
            assert!(text.contains(needle), "{arg}: {text}");
            assert!(!text.contains('\n'), "{arg}: {text}");
            assert!(err.is_bad_input(), "{arg}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_with_and_without_colons() {
        let key = RssKey::microsoft();
        assert_eq!(RssKey::from_hex(&key.to_hex()).unwrap(), key);
        assert_eq!(RssKey::from_hex(&key.to_string()).unwrap(), key);
    }

    #[test]
    fn bad_hex_is_an_error() {
        assert!(matches!(
            RssKey::from_hex("6d5"),
            Err(RssError::KeyNotHex(_))
        ));
        assert!(matches!(
            RssKey::from_hex("zz"),
            Err(RssError::KeyNotHex(_))
        ));
        assert_eq!(RssKey::from_hex(""), Err(RssError::KeyEmpty));
    }

    #[test]
    fn short_key_is_rejected_for_long_input() {
        let key = RssKey::from_hex("0102030405060708").unwrap();
        assert!(key.check_input_len(4).is_ok());
        assert!(key.check_input_len(12).is_err());
    }
}

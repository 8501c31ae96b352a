//! A namespace's protocol counters: /proc/net/snmp and /proc/net/netstat,
//! named as nstat(8) names them (`Tcp` + `RetransSegs` is `TcpRetransSegs`,
//! `TcpExt` + `TCPTimeouts` is `TcpExtTCPTimeouts`), read without running
//! nstat.
//!
//! Both files hold pairs of lines, `Group: Name1 Name2 ...` then
//! `Group: value1 value2 ...` (net/ipv4/proc.c `snmp_seq_show`,
//! `netstat_seq_show`). /proc/thread-self/net shows the reading thread's
//! namespace, so they are read from a thread inside it.

use std::collections::BTreeMap;

use crate::HostError;

/// The counters of one namespace at one moment, by nstat name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters(BTreeMap<String, i64>);

impl FromIterator<(String, i64)> for Counters {
    fn from_iter<I: IntoIterator<Item = (String, i64)>>(iter: I) -> Self {
        Counters(iter.into_iter().collect())
    }
}

impl Counters {
    /// The counters of namespace `netns` now.
    pub fn read(netns: &str) -> Result<Counters, HostError> {
        crate::netns::run_in(Some(netns), || {
            let mut all = BTreeMap::new();
            for file in ["snmp", "netstat"] {
                let path = format!("/proc/thread-self/net/{file}");
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| HostError::io(format!("read {path}"), e))?;
                all.extend(parse(&text).map_err(|detail| {
                    HostError::io(
                        format!("read {path}"),
                        std::io::Error::new(std::io::ErrorKind::InvalidData, detail),
                    )
                })?);
            }
            Ok(Counters(all))
        })?
    }

    /// Counter `name` (`TcpRetransSegs`); `None` when the kernel has no
    /// such counter or it is negative (a limit such as `TcpMaxConn`, -1).
    pub fn get(&self, name: &str) -> Option<u64> {
        self.0.get(name).and_then(|&v| u64::try_from(v).ok())
    }
}

/// The counters in the text of /proc/net/snmp or /proc/net/netstat. A
/// header without its value line, or a value line of another group or
/// length, is an error: the file is not what it claims to be.
pub fn parse(text: &str) -> Result<Vec<(String, i64)>, String> {
    let mut out = Vec::new();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    while let Some(header) = lines.next() {
        let (group, names) = header
            .split_once(':')
            .ok_or_else(|| format!("no group in '{header}'"))?;
        let values = lines
            .next()
            .ok_or_else(|| format!("{group}: names without values"))?;
        let (value_group, values) = values
            .split_once(':')
            .ok_or_else(|| format!("no group in '{values}'"))?;
        if value_group != group {
            return Err(format!("{group}: values of {value_group} follow its names"));
        }
        let (names, values): (Vec<&str>, Vec<&str>) = (
            names.split_whitespace().collect(),
            values.split_whitespace().collect(),
        );
        if names.len() != values.len() {
            return Err(format!(
                "{group}: {} names, {} values",
                names.len(),
                values.len()
            ));
        }
        for (name, value) in names.into_iter().zip(values) {
            let value = value
                .parse()
                .map_err(|e| format!("{group}{name}: '{value}': {e}"))?;
            out.push((format!("{group}{name}"), value));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_join_the_group_and_values_line_up() {
        let text = "Tcp: RtoAlgorithm MaxConn RetransSegs\nTcp: 1 -1 42\n\
                    TcpExt: TCPTimeouts TCPOFOQueue\nTcpExt: 3 9\n";
        let parsed = parse(text).unwrap();
        assert_eq!(parsed[2], ("TcpRetransSegs".into(), 42));
        let counters = Counters(parsed.into_iter().collect());
        assert_eq!(counters.get("TcpExtTCPOFOQueue"), Some(9));
        assert_eq!(counters.get("TcpMaxConn"), None, "a limit, not a counter");
        assert_eq!(counters.get("TcpNoSuch"), None);
    }

    #[test]
    fn a_file_that_is_not_snmp_is_an_error() {
        for bad in [
            "Tcp: A B\n",
            "Tcp: A B\nUdp: 1 2\n",
            "Tcp: A B\nTcp: 1\n",
            "Tcp: A\nTcp: x\n",
            "no colon\n1\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse("").unwrap(), []);
    }

    #[test]
    fn this_namespace_has_the_counters_nstat_shows() {
        let text = std::fs::read_to_string("/proc/net/snmp").unwrap();
        let parsed = parse(&text).unwrap();
        assert!(parsed.iter().any(|(n, _)| n == "TcpRetransSegs"));
        let text = std::fs::read_to_string("/proc/net/netstat").unwrap();
        let parsed = parse(&text).unwrap();
        assert!(parsed.iter().any(|(n, _)| n == "TcpExtTCPOFOQueue"));
        assert!(parsed.iter().any(|(n, _)| n == "IpExtInCEPkts"));
    }

    #[test]
    #[ignore = "needs root (network namespaces)"]
    fn a_namespaces_counters_are_its_own() {
        testkit::require_root("network namespaces");
        let ns = testkit::Netns::new("hostsnmp");
        let fresh = Counters::read(ns.name()).unwrap();
        // A new namespace has received nothing.
        assert_eq!(fresh.get("IpInReceives"), Some(0));
        assert_eq!(fresh.get("TcpExtTCPOFOQueue"), Some(0));
        let e = Counters::read("hostsnmp-none").unwrap_err();
        assert!(e.to_string().contains("hostsnmp-none"), "{e}");
    }
}

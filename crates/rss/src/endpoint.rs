//! Flow endpoints as users write them: `10.0.0.1:443`, `[2001:db8::1]:443`,
//! or an address alone (`10.0.0.1`, `2001:db8::1`) for a 2-tuple.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use crate::error::RssError;
use crate::tuple::{FlowTuple, L4Proto};

/// An address with an optional port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub port: Option<u16>,
}

impl FromStr for Endpoint {
    type Err = RssError;

    fn from_str(text: &str) -> Result<Self, RssError> {
        let bad = || RssError::BadEndpoint(text.to_string());
        if let Ok(addr) = text.parse::<IpAddr>() {
            return Ok(Endpoint { addr, port: None });
        }
        if let Ok(sock) = text.parse::<SocketAddr>() {
            return Ok(Endpoint {
                addr: sock.ip(),
                port: Some(sock.port()),
            });
        }
        // `[v6]` without a port.
        let inner = text.strip_prefix('[').and_then(|t| t.strip_suffix(']'));
        match inner.map(str::parse::<std::net::Ipv6Addr>) {
            Some(Ok(v6)) => Ok(Endpoint {
                addr: v6.into(),
                port: None,
            }),
            _ => Err(bad()),
        }
    }
}

impl Endpoint {
    /// The flow from `src` to `dst`. Both ports make a TCP/UDP flow; no ports
    /// make a flow that hashes the 2-tuple; one port alone is an error.
    pub fn flow(src: Endpoint, dst: Endpoint, proto: L4Proto) -> Result<FlowTuple, RssError> {
        if src.addr.is_ipv4() != dst.addr.is_ipv4() {
            return Err(RssError::MixedFamilies {
                src: src.addr.to_string(),
                dst: dst.addr.to_string(),
            });
        }
        match (src.port, dst.port) {
            (Some(sp), Some(dp)) => Ok(FlowTuple::new(src.addr, sp, dst.addr, dp, proto)),
            (None, None) => Ok(FlowTuple::new(src.addr, 0, dst.addr, 0, L4Proto::Other)),
            _ => Err(RssError::OnePort),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_written_form() {
        let e: Endpoint = "10.0.0.1:443".parse().unwrap();
        assert_eq!((e.addr.to_string(), e.port), ("10.0.0.1".into(), Some(443)));
        let e: Endpoint = "[2001:db8::1]:80".parse().unwrap();
        assert_eq!(
            (e.addr.to_string(), e.port),
            ("2001:db8::1".into(), Some(80))
        );
        assert_eq!("2001:db8::1".parse::<Endpoint>().unwrap().port, None);
        assert_eq!("[2001:db8::1]".parse::<Endpoint>().unwrap().port, None);
        assert_eq!("10.0.0.1".parse::<Endpoint>().unwrap().port, None);
    }

    #[test]
    fn rejects_malformed_addresses_and_ports() {
        for text in [
            "10.0.0.256:1",
            "10.0.0.1:65536",
            "10.0.0.1:",
            "host:80",
            "[::1",
            "",
            "1.2.3.4:-1",
        ] {
            assert_eq!(
                text.parse::<Endpoint>(),
                Err(RssError::BadEndpoint(text.into())),
                "{text}"
            );
        }
    }

    #[test]
    fn mixed_families_and_one_port_are_errors() {
        let v4: Endpoint = "10.0.0.1:1".parse().unwrap();
        let v6: Endpoint = "[::1]:1".parse().unwrap();
        let bare: Endpoint = "10.0.0.2".parse().unwrap();
        assert!(matches!(
            Endpoint::flow(v4, v6, L4Proto::Tcp),
            Err(RssError::MixedFamilies { .. })
        ));
        assert_eq!(
            Endpoint::flow(v4, bare, L4Proto::Tcp),
            Err(RssError::OnePort)
        );
    }
}

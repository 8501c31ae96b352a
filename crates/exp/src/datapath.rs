//! The toe data path as the experiments run it: an endpoint on a lab
//! host's AF_XDP port ([`endpoint`]), and its errors as the experiment's.

use std::net::IpAddr;

use toe::{Endpoint, EndpointConfig, ToeError};

use crate::ExpError;

/// A toe endpoint for `addr` on an AF_XDP port on `host`'s device.
pub(crate) fn endpoint(
    host: &lab::Host,
    addr: IpAddr,
    cfg: EndpointConfig,
) -> Result<Endpoint, ExpError> {
    let (port, mac) = lab::inject::xdp_port(host).map_err(|e| ExpError::Program {
        program: "AF_XDP port".into(),
        detail: e.to_string(),
    })?;
    Endpoint::new(port, mac, addr, cfg).map_err(toe_err)
}

/// A failure of the data path itself.
pub(crate) fn toe_err(e: ToeError) -> ExpError {
    ExpError::Program {
        program: "the toe data path".into(),
        detail: e.to_string(),
    }
}

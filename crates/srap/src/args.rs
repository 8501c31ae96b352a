//! Port steering's options as a command line gives them (`steer ports
//! odds|serve|lease|status`): flags, defaults and help written once here
//! (doc comments are the help; feature `clap` derives `clap::Args`).

use std::path::PathBuf;

use crate::odds::{odds, Odds};
use crate::SrapError;

/// What random source ports give N flows on M cores (`steer ports odds`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct OddsArgs {
    /// Parallel flows (iperf3 -P).
    #[cfg_attr(
        feature = "clap",
        arg(short = 'P', long, default_value_t = OddsArgs::default().flows)
    )]
    pub flows: u32,
    /// Receiver cores (one queue each, equal indirection table).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = OddsArgs::default().cores))]
    pub cores: u32,
    /// Monte Carlo trials.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = OddsArgs::default().trials))]
    pub trials: u64,
    /// Seed of the Monte Carlo run.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = OddsArgs::default().seed))]
    pub seed: u64,
}

impl Default for OddsArgs {
    /// 16 flows (a common iperf3 -P) on 32 cores, 100,000 trials, seed 1.
    fn default() -> Self {
        OddsArgs {
            flows: 16,
            cores: 32,
            trials: 100_000,
            seed: 1,
        }
    }
}

impl OddsArgs {
    /// The exact odds and the Monte Carlo cross-check ([`odds`]).
    pub fn odds(&self) -> Result<Odds, SrapError> {
        odds(self.flows, self.cores, self.trials, self.seed)
    }
}

/// The allocator's Unix socket.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SocketArgs {
    /// Allocator socket; default $STEER_ALLOC_SOCK or /run/steer/alloc.sock.
    #[cfg_attr(feature = "clap", arg(long))]
    pub socket: Option<PathBuf>,
}

impl SocketArgs {
    /// The socket given, else [`crate::alloc::socket_path`].
    pub fn path(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(crate::alloc::socket_path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odds_args_pass_every_value() {
        let args = OddsArgs {
            flows: 3,
            cores: 5,
            trials: 200,
            seed: 9,
        };
        let o = args.odds().unwrap();
        assert_eq!((o.flows, o.cores, o.trials, o.seed), (3, 5, 200, 9));
        assert_eq!(o.distribution.len(), 3);
    }

    #[test]
    fn odds_args_refuse_what_odds_refuses() {
        let args = OddsArgs {
            cores: 0,
            ..OddsArgs::default()
        };
        let err = args.odds().unwrap_err();
        assert!(err.is_bad_input(), "{err}");
    }

    #[test]
    fn socket_given_else_the_default() {
        let given = SocketArgs {
            socket: Some("/tmp/x.sock".into()),
        };
        assert_eq!(given.path(), PathBuf::from("/tmp/x.sock"));
        assert_eq!(SocketArgs::default().path(), crate::alloc::socket_path());
    }
}

//! What a load generator measured, whichever it was (wrk, redis-benchmark,
//! the memcached client), and what a content check found: the shapes the
//! apps experiment summarizes.

use std::io::{self, ErrorKind};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde::Serialize;

/// One run of a load generator, from the client's side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClientRun {
    /// Requests answered in the measured interval.
    pub requests: u64,
    /// The measured interval, seconds.
    pub seconds: f64,
    /// Requests that failed: connection errors, timeouts, error replies
    /// (an HTTP status other than 2xx, a Redis or memcached error) and
    /// replies with the wrong contents.
    pub errors: u64,
    /// Latency percentiles, µs; None where the client does not report
    /// that one (never a 0 that reads as a value).
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
}

impl ClientRun {
    /// Requests per second; None for an empty interval.
    pub fn rate(&self) -> Option<f64> {
        (self.seconds > 0.0).then(|| self.requests as f64 / self.seconds)
    }
}

/// What a content check found: every item read back compared with what
/// the server was given (a file's bytes, a value written).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Items read back and compared.
    pub checked: u64,
    /// Items whose contents differed, or that could not be read.
    pub wrong: u64,
    /// The first difference, said in a line (which item, how it
    /// differed), for the table and the JSON.
    pub first_wrong: Option<String>,
}

impl Verification {
    /// True when something was checked and nothing differed.
    pub fn passed(&self) -> bool {
        self.checked > 0 && self.wrong == 0
    }

    /// Adds the counts of another check (its first difference only if
    /// this one has none yet).
    pub fn absorb(&mut self, more: Verification) {
        self.checked += more.checked;
        self.wrong += more.wrong;
        if self.first_wrong.is_none() {
            self.first_wrong = more.first_wrong;
        }
    }

    /// Counts one item: `Ok` when it matched, `Err(why)` when not.
    pub fn record(&mut self, item: Result<(), String>) {
        self.checked += 1;
        if let Err(why) = item {
            self.wrong += 1;
            self.first_wrong.get_or_insert(why);
        }
    }
}

/// How long a client waits for a server that is starting to listen.
pub(crate) const CONNECT_PATIENCE: Duration = Duration::from_secs(10);

/// Connects to `addr` (TCP_NODELAY), retrying for `patience` while it is
/// refused. A loopback connect to a port nobody listens on can pick that
/// very port as its source and connect to itself: that is refused too.
pub(crate) fn connect_when_listening(
    addr: SocketAddr,
    patience: Duration,
) -> io::Result<TcpStream> {
    let deadline = Instant::now() + patience;
    loop {
        let stream = TcpStream::connect_timeout(&addr, patience).and_then(|s| {
            if s.local_addr()? == s.peer_addr()? {
                return Err(io::Error::from(ErrorKind::ConnectionRefused));
            }
            s.set_nodelay(true)?;
            Ok(s)
        });
        match stream {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// The first offset where `a` and `b` differ (the shorter one's length
/// when one is a prefix of the other); None when they are equal.
pub(crate) fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_passes_only_when_it_checked_and_nothing_differed() {
        let mut v = Verification::default();
        assert!(!v.passed(), "nothing checked is not a pass");
        v.record(Ok(()));
        assert!(v.passed());
        v.record(Err("GET /a: 3 bytes, the file has 4".into()));
        v.record(Err("second".into()));
        assert!(!v.passed());
        assert_eq!((v.checked, v.wrong), (3, 2));
        assert_eq!(
            v.first_wrong.as_deref(),
            Some("GET /a: 3 bytes, the file has 4")
        );
        let mut sum = Verification::default();
        sum.absorb(Verification {
            checked: 1,
            ..Verification::default()
        });
        sum.absorb(v);
        assert_eq!((sum.checked, sum.wrong), (4, 2));
        assert_eq!(
            sum.first_wrong.as_deref(),
            Some("GET /a: 3 bytes, the file has 4")
        );
    }

    #[test]
    fn the_rate_is_absent_without_an_interval() {
        let run = ClientRun {
            requests: 10,
            seconds: 0.0,
            errors: 0,
            p50_us: None,
            p99_us: None,
            p999_us: None,
        };
        assert_eq!(run.rate(), None);
        assert_eq!(
            ClientRun {
                seconds: 2.0,
                ..run
            }
            .rate(),
            Some(5.0)
        );
    }
}

//! What a load generator measured, whichever it was (wrk, redis-benchmark,
//! the memcached client), and what a content check found: the shapes the
//! apps experiment summarizes.

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

//! What the wire does to each packet of one direction: a delay drawn from a
//! distribution, a loss process and a rate limit, like netem's `delay`,
//! `loss` and `rate` (tc-netem(8)), which this kernel does not have.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use serde::Serialize;

/// A per-packet delay distribution. Draws are independent, so a spread
/// reorders packets exactly as often as two draws cross.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Delay {
    /// Every packet `ns`.
    Constant { ns: u64 },
    /// Normal(mean, sd), truncated at 0 (SRPIC paper section 4.1.1: mean
    /// 2.5 ms, sd = mean * relative spread).
    Normal { mean_ns: u64, sd_ns: u64 },
    /// Uniform on [lo, hi].
    Uniform { lo_ns: u64, hi_ns: u64 },
}

impl Default for Delay {
    fn default() -> Self {
        Delay::Constant { ns: 0 }
    }
}

impl Delay {
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        match *self {
            Delay::Constant { ns } => ns,
            Delay::Normal { mean_ns, sd_ns } => {
                if sd_ns == 0 {
                    return mean_ns;
                }
                // Box-Muller; u1 in (0, 1] so the log is finite.
                let u1: f64 = 1.0 - rng.gen::<f64>();
                let u2: f64 = rng.gen::<f64>();
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (mean_ns as f64 + sd_ns as f64 * z).max(0.0) as u64
            }
            Delay::Uniform { lo_ns, hi_ns } => {
                if hi_ns <= lo_ns {
                    lo_ns
                } else {
                    rng.gen_range(lo_ns..=hi_ns)
                }
            }
        }
    }

    /// The mean delay, ns.
    pub fn mean_ns(&self) -> u64 {
        match *self {
            Delay::Constant { ns } => ns,
            Delay::Normal { mean_ns, .. } => mean_ns,
            Delay::Uniform { lo_ns, hi_ns } => (lo_ns + hi_ns.max(lo_ns)) / 2,
        }
    }
}

/// A loss process.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Loss {
    #[default]
    None,
    /// Each packet lost with probability `p`, independently.
    Uniform { p: f64 },
    /// Gilbert-Elliott: a two-state Markov chain stepped once per packet
    /// (good -> bad with `p`, bad -> good with `r`), losing with
    /// `loss_good` in the good state and `loss_bad` in the bad one
    /// (tc-netem's `loss gemodel p r 1-h 1-k`).
    GilbertElliott {
        p: f64,
        r: f64,
        loss_bad: f64,
        loss_good: f64,
    },
}

impl Loss {
    /// The long-run loss rate.
    pub fn mean_rate(&self) -> f64 {
        match *self {
            Loss::None => 0.0,
            Loss::Uniform { p } => p,
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                if p + r == 0.0 {
                    loss_good
                } else {
                    let bad = p / (p + r);
                    bad * loss_bad + (1.0 - bad) * loss_good
                }
            }
        }
    }
}

/// The loss process with its state.
#[derive(Debug, Clone)]
pub struct LossState {
    loss: Loss,
    bad: bool,
}

impl LossState {
    pub fn new(loss: Loss) -> Self {
        LossState { loss, bad: false }
    }

    /// Whether the next packet is lost.
    pub fn lose(&mut self, rng: &mut impl Rng) -> bool {
        match self.loss {
            Loss::None => false,
            Loss::Uniform { p } => p > 0.0 && rng.gen::<f64>() < p,
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                let flip = if self.bad { r } else { p };
                if rng.gen::<f64>() < flip {
                    self.bad = !self.bad;
                }
                let q = if self.bad { loss_bad } else { loss_good };
                q > 0.0 && rng.gen::<f64>() < q
            }
        }
    }
}

/// Everything applied to one direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Impairment {
    pub delay: Delay,
    pub loss: Loss,
    /// Link rate in bit/s (0: unlimited). Frames are serialized at this rate
    /// (Ethernet framing overhead, 24 bytes, included) before their delay.
    pub rate_bps: u64,
    /// Most frames waiting for the rate limiter; more are dropped as
    /// overload (netem's and txqueuelen's default: 1000).
    pub queue_frames: u32,
    /// DCTCP-style marking (RFC 8257 section 3.1): an ECN-capable frame
    /// that arrives while at least this many full frames' worth of bytes
    /// wait for the rate limiter is marked Congestion Experienced (None:
    /// no marking; frames that are not ECN-capable are never marked).
    pub ecn_mark_frames: Option<u32>,
}

impl Default for Impairment {
    fn default() -> Self {
        Impairment {
            delay: Delay::default(),
            loss: Loss::None,
            rate_bps: 0,
            queue_frames: 1000,
            ecn_mark_frames: None,
        }
    }
}

impl Impairment {
    /// The impairment written as specs (`steer wire run`'s flags): a
    /// [`Delay`], a [`Loss`], a rate for [`parse_rate_bps`], the rate
    /// limiter's queue, and the queue length past which ECN-capable frames
    /// are marked, which needs a rate limiter to queue in.
    pub fn from_specs(
        delay: &str,
        loss: &str,
        rate: &str,
        queue_frames: u32,
        ecn_mark_frames: Option<u32>,
    ) -> Result<Impairment, SpecError> {
        let rate_bps = parse_rate_bps(rate).ok_or_else(|| SpecError {
            what: "rate",
            text: rate.to_string(),
            expected: "use 1gbit, 500mbit, 0",
        })?;
        if let (Some(k), 0) = (ecn_mark_frames, rate_bps) {
            return Err(SpecError {
                what: "ecn-mark",
                text: k.to_string(),
                expected: "a --rate above 0 (frames are marked in the rate limiter's queue)",
            });
        }
        Ok(Impairment {
            delay: delay.parse()?,
            loss: loss.parse()?,
            rate_bps,
            queue_frames,
            ecn_mark_frames,
        })
    }
}

/// Both directions of a wire written as specs: `steer wire run`'s flags
/// (with the `clap` feature), read by [`Impairment::from_specs`]. The rate
/// limit, its queue and the marking threshold apply each way.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct WireSpecs {
    /// Forward (sender to receiver) delay: const:2.5ms | normal:2.5ms,25us |
    /// normal:2.5ms,1% | uniform:1ms,4ms.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = WireSpecs::default().delay))]
    pub delay: String,
    /// Reverse delay (same forms).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = WireSpecs::default().rev_delay))]
    pub rev_delay: String,
    /// Forward loss: none | 0.1% | ge:P,R[,LOSS_BAD[,LOSS_GOOD]] (Gilbert-Elliott).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = WireSpecs::default().loss))]
    pub loss: String,
    /// Reverse loss.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = WireSpecs::default().rev_loss))]
    pub rev_loss: String,
    /// Link rate each way: 1gbit, 500mbit, 0 (unlimited).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = WireSpecs::default().rate))]
    pub rate: String,
    /// Frames that may wait for the rate limiter (more are dropped).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = WireSpecs::default().queue))]
    pub queue: u32,
    /// Mark ECN-capable frames Congestion Experienced once this many full
    /// frames wait for the rate limiter (DCTCP's threshold K, RFC 8257);
    /// needs --rate.
    #[cfg_attr(feature = "clap", arg(long, value_name = "FRAMES"))]
    pub ecn_mark: Option<u32>,
}

impl Default for WireSpecs {
    /// No impairment: what [`Impairment::default`] is, written as specs.
    fn default() -> Self {
        WireSpecs {
            delay: "0".into(),
            rev_delay: "0".into(),
            loss: "none".into(),
            rev_loss: "none".into(),
            rate: "0".into(),
            queue: Impairment::default().queue_frames,
            ecn_mark: None,
        }
    }
}

impl WireSpecs {
    /// The forward and reverse impairments; a bad spec in either refuses both.
    pub fn impairments(&self) -> Result<(Impairment, Impairment), SpecError> {
        let direction = |delay: &str, loss: &str| {
            Impairment::from_specs(delay, loss, &self.rate, self.queue, self.ecn_mark)
        };
        Ok((
            direction(&self.delay, &self.loss)?,
            direction(&self.rev_delay, &self.rev_loss)?,
        ))
    }
}

/// A bad impairment spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} '{text}': {expected}")]
pub struct SpecError {
    pub what: &'static str,
    pub text: String,
    pub expected: &'static str,
}

impl SpecError {
    /// Never the environment.
    pub fn is_environment(&self) -> bool {
        false
    }

    /// Always bad input: the spec given does not parse (CLI exit 2).
    pub fn is_bad_input(&self) -> bool {
        true
    }
}

/// "2.5ms", "250us", "100ns", "1s", "0".
pub fn parse_duration_ns(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else if t == "0" {
        ("0", 1.0)
    } else {
        return None;
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * mult).round() as u64)
}

/// "0.1%" or "0.001".
fn parse_fraction(text: &str) -> Option<f64> {
    let t = text.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().ok()? / 100.0,
        None => t.parse::<f64>().ok()?,
    };
    (0.0..=1.0).contains(&v).then_some(v)
}

/// "1gbit", "500mbit", "10kbit", "1000000" (bit/s), "0" (unlimited).
pub fn parse_rate_bps(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("gbit") {
        (n.to_string(), 1e9)
    } else if let Some(n) = t.strip_suffix("mbit") {
        (n.to_string(), 1e6)
    } else if let Some(n) = t.strip_suffix("kbit") {
        (n.to_string(), 1e3)
    } else if let Some(n) = t.strip_suffix("bit") {
        (n.to_string(), 1.0)
    } else {
        (t.clone(), 1.0)
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some((v * mult) as u64)
}

impl FromStr for Delay {
    type Err = SpecError;
    /// `const:2.5ms` (or just `2.5ms`), `normal:MEAN,SD` (SD may be a
    /// percentage of MEAN: `normal:2.5ms,1%`), `uniform:LO,HI`.
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let err = || SpecError {
            what: "delay",
            text: s.to_string(),
            expected: "const:2.5ms | normal:2.5ms,25us | normal:2.5ms,1% | uniform:1ms,4ms",
        };
        let (kind, args) = s.split_once(':').unwrap_or(("const", s));
        let parts: Vec<&str> = args.split(',').collect();
        match (kind, parts.as_slice()) {
            ("const" | "constant", [d]) => Ok(Delay::Constant {
                ns: parse_duration_ns(d).ok_or_else(err)?,
            }),
            ("normal", [m, sd]) => {
                let mean_ns = parse_duration_ns(m).ok_or_else(err)?;
                let sd_ns = match sd.trim().strip_suffix('%') {
                    Some(_) => (parse_fraction(sd).ok_or_else(err)? * mean_ns as f64) as u64,
                    None => parse_duration_ns(sd).ok_or_else(err)?,
                };
                Ok(Delay::Normal { mean_ns, sd_ns })
            }
            ("uniform", [lo, hi]) => {
                let lo_ns = parse_duration_ns(lo).ok_or_else(err)?;
                let hi_ns = parse_duration_ns(hi).ok_or_else(err)?;
                if hi_ns < lo_ns {
                    return Err(err());
                }
                Ok(Delay::Uniform { lo_ns, hi_ns })
            }
            _ => Err(err()),
        }
    }
}

impl FromStr for Loss {
    type Err = SpecError;
    /// `none`, `0.1%` / `uniform:0.1%`, `ge:P,R[,LOSS_BAD[,LOSS_GOOD]]`
    /// (defaults 100% and 0%).
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let err = || SpecError {
            what: "loss",
            text: s.to_string(),
            expected: "none | 0.1% | uniform:0.001 | ge:1%,30%[,100%[,0%]]",
        };
        if s == "none" || s == "0" {
            return Ok(Loss::None);
        }
        let (kind, args) = s.split_once(':').unwrap_or(("uniform", s));
        let parts: Vec<&str> = args.split(',').collect();
        let f = |t: &str| parse_fraction(t).ok_or_else(err);
        match (kind, parts.as_slice()) {
            ("uniform", [p]) => Ok(Loss::Uniform { p: f(p)? }),
            ("ge" | "gilbert-elliott", [p, r, rest @ ..]) if rest.len() <= 2 => {
                Ok(Loss::GilbertElliott {
                    p: f(p)?,
                    r: f(r)?,
                    loss_bad: rest.first().map_or(Ok(1.0), |t| f(t))?,
                    loss_good: rest.get(1).map_or(Ok(0.0), |t| f(t))?,
                })
            }
            _ => Err(err()),
        }
    }
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |ns: u64| ns as f64 / 1e3;
        match *self {
            Delay::Constant { ns } => write!(f, "const {} us", us(ns)),
            Delay::Normal { mean_ns, sd_ns } => {
                write!(f, "normal({} us, sd {} us)", us(mean_ns), us(sd_ns))
            }
            Delay::Uniform { lo_ns, hi_ns } => {
                write!(f, "uniform[{}, {}] us", us(lo_ns), us(hi_ns))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn specs_make_an_impairment_and_marking_needs_a_rate() {
        let i = Impairment::from_specs("const:2ms", "1%", "100mbit", 48, Some(20)).unwrap();
        assert_eq!(i.delay.mean_ns(), 2_000_000);
        assert!((i.loss.mean_rate() - 0.01).abs() < 1e-12);
        assert_eq!((i.rate_bps, i.queue_frames), (100_000_000, 48));
        assert_eq!(i.ecn_mark_frames, Some(20));
        let what = |d, l, r, k| Impairment::from_specs(d, l, r, 1000, k).unwrap_err().what;
        assert_eq!(what("0", "none", "fast", None), "rate");
        assert_eq!(what("0", "none", "0", Some(20)), "ecn-mark");
        assert_eq!(what("soon", "none", "0", None), "delay");
        assert_eq!(what("0", "often", "0", None), "loss");
        let e = Impairment::from_specs("0", "none", "fast", 1000, None).unwrap_err();
        assert_eq!(e.to_string(), "rate 'fast': use 1gbit, 500mbit, 0");
    }

    #[test]
    fn wire_specs_read_each_direction_and_default_to_no_impairment() {
        let none = WireSpecs::default().impairments().unwrap();
        assert_eq!(none, (Impairment::default(), Impairment::default()));
        let specs = WireSpecs {
            rev_delay: "const:3ms".into(),
            loss: "1%".into(),
            rate: "1gbit".into(),
            ..WireSpecs::default()
        };
        let (forward, reverse) = specs.impairments().unwrap();
        assert_eq!(
            (forward.delay.mean_ns(), reverse.delay.mean_ns()),
            (0, 3_000_000)
        );
        assert_eq!(
            (forward.loss, reverse.loss),
            (Loss::Uniform { p: 0.01 }, Loss::None)
        );
        assert_eq!(
            (forward.rate_bps, reverse.rate_bps),
            (1_000_000_000, 1_000_000_000)
        );
        let bad = WireSpecs {
            rev_loss: "often".into(),
            ..WireSpecs::default()
        };
        assert_eq!(bad.impairments().unwrap_err().what, "loss");
    }

    #[cfg(feature = "clap")]
    #[test]
    fn wire_specs_flags_default_to_the_library_defaults() {
        use clap::Parser;
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            specs: WireSpecs,
        }
        assert_eq!(Flags::parse_from(["t"]).specs, WireSpecs::default());
        let set = Flags::parse_from(["t", "--rev-delay", "1ms", "--ecn-mark", "20"]);
        assert_eq!(
            (set.specs.rev_delay.as_str(), set.specs.ecn_mark),
            ("1ms", Some(20))
        );
    }

    #[test]
    fn parse_specs() {
        assert_eq!(
            "normal:2.5ms,1%".parse::<Delay>().unwrap(),
            Delay::Normal {
                mean_ns: 2_500_000,
                sd_ns: 25_000
            }
        );
        assert_eq!(
            "3ms".parse::<Delay>().unwrap(),
            Delay::Constant { ns: 3_000_000 }
        );
        assert!("uniform:3ms,1ms".parse::<Delay>().is_err());
        assert!("normal:2.5ms".parse::<Delay>().is_err());
        assert_eq!("0.1%".parse::<Loss>().unwrap(), Loss::Uniform { p: 0.001 });
        assert!("150%".parse::<Loss>().is_err());
        assert!(matches!(
            "ge:1%,30%".parse::<Loss>().unwrap(),
            Loss::GilbertElliott { loss_bad, .. } if loss_bad == 1.0
        ));
        assert_eq!(parse_rate_bps("1gbit"), Some(1_000_000_000));
        assert_eq!(parse_rate_bps("x"), None);
    }

    #[test]
    fn normal_draws_have_the_asked_moments() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let d = Delay::Normal {
            mean_ns: 2_500_000,
            sd_ns: 250_000,
        };
        let xs: Vec<f64> = (0..200_000).map(|_| d.sample(&mut rng) as f64).collect();
        let mean = ::stats::mean(&xs).unwrap();
        let sd = ::stats::stddev(&xs).unwrap();
        assert!((mean - 2.5e6).abs() < 5e3, "{mean}");
        assert!((sd - 2.5e5).abs() < 5e3, "{sd}");
    }

    #[test]
    fn gilbert_elliott_loses_in_bursts_at_the_mean_rate() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let loss = Loss::GilbertElliott {
            p: 0.01,
            r: 0.25,
            loss_bad: 1.0,
            loss_good: 0.0,
        };
        let mut st = LossState::new(loss);
        let lost: Vec<bool> = (0..400_000).map(|_| st.lose(&mut rng)).collect();
        let rate = lost.iter().filter(|&&l| l).count() as f64 / lost.len() as f64;
        assert!((rate - loss.mean_rate()).abs() < 0.005, "{rate}");
        // Bursty: a loss is followed by a loss far more often than the mean rate.
        let pairs = lost.windows(2).filter(|w| w[0]).count() as f64;
        let both = lost.windows(2).filter(|w| w[0] && w[1]).count() as f64;
        assert!(both / pairs > 0.6, "{}", both / pairs);
    }
}

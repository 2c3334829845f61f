//! cassandra-stress's distributions (`fixed(n)`, `uniform(a..b)`, `gaussian(a..b[,stdevs])` and
//! `gaussian(a..b,mean,stdev)`, `exp(a..b)`, `extreme(a..b,shape)`, `seq(a..b)`, `~` to invert),
//! with its defaults and its number suffixes (k, m, b: thousands, millions, billions).
//! `fixed`, `uniform`, `gaussian` and `seq` draw exactly as cassandra-stress does (a
//! `java.util.Random` under commons-math's formulas), so a size distribution of those kinds
//! gives the same cells; `exp` and `extreme` draw by inverse transform from the same
//! distributions, which matches in distribution but not value by value.

use std::fmt;

use super::random::JavaRandom;

#[derive(Clone, Debug, PartialEq)]
pub enum DistSpec {
    Fixed(i64),
    Uniform { min: i64, max: i64 },
    Gaussian { min: i64, max: i64, mean: f64, stdev: f64 },
    Exp { min: i64, max: i64, mean: f64 },
    Extreme { min: i64, max: i64, shape: f64, scale: f64 },
    Seq { min: i64, max: i64 },
    Inverted(Box<DistSpec>),
}

/// "10", "5k", "100B" → 10, 5000, 100000000000 (cassandra-stress's multipliers are powers of
/// 1000).
pub fn parse_count(text: &str) -> Result<i64, String> {
    let t = text.trim().to_ascii_lowercase();
    let (digits, multiplier) = match t.chars().last() {
        Some('b') => (&t[..t.len() - 1], 1_000_000_000),
        Some('m') => (&t[..t.len() - 1], 1_000_000),
        Some('k') => (&t[..t.len() - 1], 1_000),
        _ => (t.as_str(), 1),
    };
    digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| format!("\"{text}\" is not a count (digits with an optional k, m or b)"))
}

fn range(text: &str) -> Result<(i64, i64), String> {
    let (a, b) = text.split_once("..").ok_or_else(|| format!("\"{text}\" is not a range; write min..max"))?;
    let (min, max) = (parse_count(a)?, parse_count(b.trim_start_matches('.'))?);
    if min > max {
        return Err(format!("\"{text}\": min is larger than max"));
    }
    Ok((min, max))
}

impl DistSpec {
    /// Parses `name(args)` with an optional leading `~`.
    pub fn parse(text: &str) -> Result<DistSpec, String> {
        let t = text.trim();
        if let Some(rest) = t.strip_prefix('~') {
            return Ok(DistSpec::Inverted(Box::new(DistSpec::parse(rest)?)));
        }
        let open = t
            .find('(')
            .ok_or_else(|| format!("\"{text}\" is not a distribution; write e.g. fixed(34) or uniform(1..100)"))?;
        if !t.ends_with(')') {
            return Err(format!("\"{text}\" is missing its closing parenthesis"));
        }
        let name = t[..open].to_ascii_lowercase();
        let args: Vec<&str> = t[open + 1..t.len() - 1].split(',').map(str::trim).filter(|a| !a.is_empty()).collect();
        let bad = || format!("invalid parameters for {name}: {text}");
        let number = |s: &str| s.parse::<f64>().map_err(|_| bad());
        match name.as_str() {
            "fixed" if args.len() == 1 => Ok(DistSpec::Fixed(parse_count(args[0])?)),
            "uniform" if args.len() == 1 => {
                let (min, max) = range(args[0])?;
                Ok(DistSpec::Uniform { min, max })
            }
            "gaussian" | "gauss" | "normal" | "norm" if (1..=3).contains(&args.len()) => {
                let (min, max) = range(args[0])?;
                if min == max {
                    return Ok(DistSpec::Fixed(min));
                }
                let (mean, stdev) = if args.len() == 3 {
                    (number(args[1])?, number(args[2])?)
                } else {
                    let stdevs_to_edge = if args.len() == 2 { number(args[1])? } else { 3.0 };
                    ((min + max) as f64 / 2.0, (max - min) as f64 / 2.0 / stdevs_to_edge)
                };
                Ok(DistSpec::Gaussian { min, max, mean, stdev })
            }
            "exp" if args.len() == 1 => {
                let (min, max) = range(args[0])?;
                if min == max {
                    return Ok(DistSpec::Fixed(min));
                }
                // As cassandra-stress: the (1 - sqrt(1/span)) quantile of exp(1) maps to the span.
                let mean = (max - min) as f64 / (0.5 * ((max - min) as f64).ln());
                Ok(DistSpec::Exp { min, max, mean })
            }
            "extreme" | "extr" | "weibull" if args.len() == 2 => {
                let (min, max) = range(args[0])?;
                if min == max {
                    return Ok(DistSpec::Fixed(min));
                }
                let shape = number(args[1])?;
                let scale = (max - min) as f64 / (0.5 * ((max - min) as f64).ln()).powf(1.0 / shape);
                Ok(DistSpec::Extreme { min, max, shape, scale })
            }
            "seq" if args.len() == 1 => {
                let (min, max) = range(args[0])?;
                Ok(DistSpec::Seq { min, max })
            }
            "fixed" | "uniform" | "gaussian" | "gauss" | "normal" | "norm" | "exp" | "extreme" | "extr" | "weibull"
            | "seq" => Err(bad()),
            _ => Err(format!(
                "\"{name}\" is not a distribution; use fixed, uniform, gaussian, exp, extreme or seq (~ inverts)"
            )),
        }
    }

    pub fn min_value(&self) -> i64 {
        match self {
            DistSpec::Fixed(v) => *v,
            DistSpec::Uniform { min, .. }
            | DistSpec::Gaussian { min, .. }
            | DistSpec::Exp { min, .. }
            | DistSpec::Extreme { min, .. }
            | DistSpec::Seq { min, .. } => *min,
            DistSpec::Inverted(inner) => inner.min_value(),
        }
    }

    pub fn max_value(&self) -> i64 {
        match self {
            DistSpec::Fixed(v) => *v,
            DistSpec::Uniform { max, .. }
            | DistSpec::Gaussian { max, .. }
            | DistSpec::Exp { max, .. }
            | DistSpec::Extreme { max, .. }
            | DistSpec::Seq { max, .. } => *max,
            DistSpec::Inverted(inner) => inner.max_value(),
        }
    }

    /// A sampler seeded with `seed` (cassandra-stress seeds per generator; populations reseed).
    pub fn sampler(&self, seed: i64) -> Dist {
        Dist { spec: self.clone(), rng: JavaRandom::new(seed), seq_next: 0 }
    }
}

/// The way cassandra-stress prints a distribution in its settings dump.
impl fmt::Display for DistSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DistSpec::Fixed(v) => write!(f, "Fixed:  key={v}"),
            DistSpec::Uniform { min, max } => write!(f, "Uniform:  min={min},max={max}"),
            DistSpec::Gaussian { min, max, mean, stdev } => {
                write!(f, "Gaussian:  min={min},max={max},mean={mean:.6},stdev={stdev:.6}")
            }
            DistSpec::Exp { min, max, mean } => write!(f, "Exponential:  min={min},max={max},mean={mean:.6}"),
            DistSpec::Extreme { min, max, shape, scale } => {
                write!(f, "Extreme:  min={min},max={max},shape={shape:.6}, scale={scale:.6}")
            }
            DistSpec::Seq { min, max } => write!(f, "Sequence:  start={min},end={max}"),
            DistSpec::Inverted(inner) => write!(f, "Inverse: {inner}"),
        }
    }
}

/// A seeded draw from a distribution.
#[derive(Clone, Debug)]
pub struct Dist {
    spec: DistSpec,
    rng: JavaRandom,
    seq_next: i64,
}

/// commons-math's bound for a real sample: truncate toward zero, clamp to [min, max].
fn bound(min: i64, max: i64, value: f64) -> i64 {
    (value as i64).clamp(min, max)
}

impl Dist {
    pub fn set_seed(&mut self, seed: i64) {
        match self.spec {
            DistSpec::Seq { .. } => self.seq_next = seed,
            _ => self.rng.set_seed(seed),
        }
    }

    pub fn sample(&mut self) -> i64 {
        draw(&self.spec, &mut self.rng, &mut self.seq_next)
    }
}

fn draw(spec: &DistSpec, rng: &mut JavaRandom, seq_next: &mut i64) -> i64 {
    match spec {
        DistSpec::Fixed(v) => *v,
        DistSpec::Uniform { min, max } => {
            let u = rng.next_double();
            bound(*min, *max, u * (*max as f64 + 1.0) + (1.0 - u) * *min as f64)
        }
        DistSpec::Gaussian { min, max, mean, stdev } => bound(*min, *max, stdev * rng.next_gaussian() + mean),
        DistSpec::Exp { min, max, mean } => {
            let x = -mean * (1.0 - rng.next_double()).ln();
            min + (x as i64).clamp(0, max - min)
        }
        DistSpec::Extreme { min, max, shape, scale } => {
            let x = scale * (-(1.0 - rng.next_double()).ln()).powf(1.0 / shape);
            min + (x as i64).clamp(0, max - min)
        }
        DistSpec::Seq { min, max } => {
            let total = max - min + 1;
            let v = min + seq_next.rem_euclid(total);
            *seq_next += 1;
            v
        }
        DistSpec::Inverted(inner) => {
            let (lo, hi) = (inner.min_value(), inner.max_value());
            hi - (draw(inner, rng, seq_next) - lo)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_cassandra_stress_defaults() {
        assert_eq!(DistSpec::parse("FIXED(34)").unwrap(), DistSpec::Fixed(34));
        assert_eq!(DistSpec::parse("uniform(1..100B)").unwrap(), DistSpec::Uniform { min: 1, max: 100_000_000_000 });
        let DistSpec::Gaussian { mean, stdev, .. } = DistSpec::parse("gaussian(1..1000000)").unwrap() else { panic!() };
        assert_eq!((mean, stdev), (500_000.5, 999_999.0 / 2.0 / 3.0));
        assert_eq!(
            DistSpec::parse("gauss(1..100,5)").unwrap().to_string(),
            "Gaussian:  min=1,max=100,mean=50.500000,stdev=9.900000"
        );
        assert!(matches!(DistSpec::parse("~exp(1..1k)").unwrap(), DistSpec::Inverted(_)));
        assert!(DistSpec::parse("zipf(1..10)").unwrap_err().contains("is not a distribution"));
        assert!(DistSpec::parse("uniform(10..1)").unwrap_err().contains("larger than max"));
    }

    #[test]
    fn draws_stay_in_range_and_sequences_wrap() {
        for spec in ["uniform(5..10)", "gaussian(1..100)", "exp(1..1000)", "extreme(1..1000,1.5)", "~uniform(1..3)"] {
            let s = DistSpec::parse(spec).unwrap();
            let mut d = s.sampler(7);
            for _ in 0..2000 {
                let v = d.sample();
                assert!((s.min_value()..=s.max_value()).contains(&v), "{spec}: {v}");
            }
        }
        let mut seq = DistSpec::parse("seq(1..3)").unwrap().sampler(0);
        assert_eq!((0..5).map(|_| seq.sample()).collect::<Vec<_>>(), [1, 2, 3, 1, 2]);
    }
}

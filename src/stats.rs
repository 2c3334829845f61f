//! Statistics of repeated measurements: summaries, bootstrap confidence intervals of the median
//! and of the difference of two medians, and a permutation p-value. All resampling is seeded,
//! so the same result set always gives the same report.

/// What the repetitions of one metric of one cell looked like.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    pub stddev: f64,
    /// Coefficient of variation (stddev / mean), as a percentage.
    pub cv_pct: f64,
    pub min: f64,
    pub max: f64,
    /// 95 % bootstrap confidence interval of the median.
    pub ci: (f64, f64),
}

impl Summary {
    /// Half the CI's width relative to the median, in percent: "± x %".
    pub fn ci_half_width_pct(&self) -> f64 {
        if self.median == 0.0 { f64::INFINITY } else { (self.ci.1 - self.ci.0) / 2.0 / self.median.abs() * 100.0 }
    }
}

/// Confidence level of every interval isobench reports.
pub const LEVEL: f64 = 0.95;
/// Bootstrap resamples per interval: enough for stable 2.5/97.5 percentiles at these sizes.
const RESAMPLES: usize = 2000;
const PERMUTATIONS: usize = 2000;

pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let stddev =
        if n > 1 { (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt() } else { 0.0 };
    Some(Summary {
        n,
        median: median(values),
        mean,
        stddev,
        cv_pct: if mean != 0.0 { stddev / mean.abs() * 100.0 } else { 0.0 },
        min: values.iter().cloned().fold(f64::INFINITY, f64::min),
        max: values.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        ci: median_ci(values, &mut Rng::seeded(values)),
    })
}

pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    sorted_median(&sorted)
}

fn sorted_median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Percentile-bootstrap CI of the median.
pub fn median_ci(values: &[f64], rng: &mut Rng) -> (f64, f64) {
    if values.len() < 2 {
        let v = values.first().copied().unwrap_or(f64::NAN);
        return (v, v);
    }
    let mut buf = vec![0.0; values.len()];
    let mut medians: Vec<f64> = (0..RESAMPLES).map(|_| resampled_median(values, &mut buf, rng)).collect();
    percentile_interval(&mut medians)
}

/// How a cell compares with its baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// median(cell) / median(baseline).
    pub ratio: f64,
    /// (median(cell) − median(baseline)) / median(baseline), in percent.
    pub pct: f64,
    /// 95 % CI of `pct`, from resampling both sides.
    pub ci: (f64, f64),
    /// Two-sided permutation p-value for "the medians are equal".
    pub p_value: f64,
}

/// The difference of medians between `cell` and `baseline`, with its bootstrap CI and p-value.
pub fn difference(cell: &[f64], baseline: &[f64]) -> Option<Difference> {
    let (mc, mb) = (median(cell), median(baseline));
    if cell.is_empty() || baseline.is_empty() || mb == 0.0 || !mb.is_finite() {
        return None;
    }
    let pct = (mc - mb) / mb * 100.0;
    let mut rng = Rng::seeded(&[cell, baseline].concat());
    let (mut bc, mut bb) = (vec![0.0; cell.len()], vec![0.0; baseline.len()]);
    let mut diffs: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            let c = resampled_median(cell, &mut bc, &mut rng);
            let b = resampled_median(baseline, &mut bb, &mut rng);
            (b != 0.0).then(|| (c - b) / b * 100.0)
        })
        .collect();
    let ci = if diffs.is_empty() { (pct, pct) } else { percentile_interval(&mut diffs) };
    Some(Difference { ratio: mc / mb, pct, ci, p_value: permutation_p_value(cell, baseline, &mut rng) })
}

/// How often a random relabelling of the pooled values gives a difference of medians at least as
/// large as the observed one.
fn permutation_p_value(a: &[f64], b: &[f64], rng: &mut Rng) -> f64 {
    let observed = (median(a) - median(b)).abs();
    let mut pool: Vec<f64> = a.iter().chain(b).copied().collect();
    let mut at_least = 0usize;
    for _ in 0..PERMUTATIONS {
        rng.shuffle(&mut pool);
        let (pa, pb) = pool.split_at(a.len());
        // A tiny tolerance so ties with the observed split count as "at least as large".
        if (median(pa) - median(pb)).abs() >= observed * (1.0 - 1e-12) {
            at_least += 1;
        }
    }
    (at_least + 1) as f64 / (PERMUTATIONS + 1) as f64
}

fn resampled_median(values: &[f64], buf: &mut [f64], rng: &mut Rng) -> f64 {
    for slot in buf.iter_mut() {
        *slot = values[rng.below(values.len())];
    }
    buf.sort_by(|a, b| a.total_cmp(b));
    sorted_median(buf)
}

/// The central `LEVEL` interval of `samples` (sorted in place).
fn percentile_interval(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(|a, b| a.total_cmp(b));
    let tail = (1.0 - LEVEL) / 2.0;
    (quantile(samples, tail), quantile(samples, 1.0 - tail))
}

/// Linear-interpolation quantile of sorted data.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// xoshiro256** seeded through SplitMix64: small, fast and reproducible; statistics need no
/// cryptographic randomness, only the same stream for the same data.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng { s: [next(), next(), next(), next()] }
    }

    /// Seeded from the data itself, so a report is reproducible without storing seeds.
    pub fn seeded(values: &[f64]) -> Rng {
        let seed = values.iter().fold(0xC0FF_EE00_D15E_A5E5u64, |h, v| (h ^ v.to_bits()).wrapping_mul(0x100_0000_01B3));
        Rng::new(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in 0..n (Lemire's multiply-shift; the bias is < n / 2^64).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(f64::MIN_POSITIVE);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// The two-sided p-value of Student's t statistic `t` with `df` degrees of freedom.
pub fn student_t_p(t: f64, df: f64) -> f64 {
    if t.is_nan() || df <= 0.0 {
        return 1.0;
    }
    if t.is_infinite() {
        return 0.0;
    }
    incomplete_beta(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// The t with `df` degrees of freedom whose two-sided p-value is `p` (bisection on `student_t_p`).
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 1e6);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if student_t_p(mid, df) > p { lo = mid } else { hi = mid }
    }
    (lo + hi) / 2.0
}

/// ln Γ(x), Lanczos' approximation (g = 7, nine terms): 15 digits for x > 0.
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = C[1..].iter().enumerate().fold(C[0], |s, (i, c)| s + c / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// The regularised incomplete beta function I_x(a, b), by its continued fraction (modified Lentz).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    // The fraction converges fast only below the mean; above it, use the symmetry.
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - incomplete_beta(b, a, 1.0 - x);
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp() / a;
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    d = 1.0 / if d.abs() < tiny { tiny } else { d };
    let mut f = d;
    for m in 1..300 {
        let m = m as f64;
        for numerator in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + numerator * d;
            d = 1.0 / if d.abs() < tiny { tiny } else { d };
            c = 1.0 + numerator / c;
            c = if c.abs() < tiny { tiny } else { c };
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_values() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        assert_eq!(s.median, 4.5);
        assert_eq!(s.mean, 5.0);
        assert!((s.stddev - 2.138).abs() < 1e-3);
        assert_eq!((s.min, s.max), (2.0, 9.0));
        assert!(s.ci.0 <= s.median && s.median <= s.ci.1);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn resampling_is_reproducible() {
        let v = [10.0, 12.0, 11.0, 13.0, 9.0];
        assert_eq!(summarize(&v), summarize(&v));
        assert_eq!(difference(&v, &[20.0, 21.0, 19.0]), difference(&v, &[20.0, 21.0, 19.0]));
    }

    /// The bootstrap CI of the median of a normal sample covers the true median about 95 % of
    /// the time: 1000 seeded trials of n = 25 from N(100, 10²).
    #[test]
    fn median_ci_covers_the_true_median_about_95_percent_of_the_time() {
        let mut rng = Rng::new(42);
        let trials = 1000;
        let mut covered = 0;
        for _ in 0..trials {
            let sample: Vec<f64> = (0..25).map(|_| 100.0 + 10.0 * rng.normal()).collect();
            let (lo, hi) = median_ci(&sample, &mut rng);
            covered += usize::from(lo <= 100.0 && 100.0 <= hi);
        }
        let coverage = covered as f64 / trials as f64;
        eprintln!("bootstrap median CI coverage: {coverage}");
        assert!((0.92..=0.98).contains(&coverage), "coverage {coverage}");
    }

    #[test]
    fn differences_have_sign_ci_and_p_value() {
        let base = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2];
        let slower = [80.0, 81.0, 79.0, 80.5, 79.5, 80.2];
        let d = difference(&slower, &base).unwrap();
        assert!((d.pct + 20.0).abs() < 0.5 && (d.ratio - 0.8).abs() < 0.01);
        assert!(d.ci.0 <= d.pct && d.pct <= d.ci.1 && d.ci.1 < 0.0, "{d:?}");
        assert!(d.p_value < 0.05, "{d:?}");
        let same = [100.1, 99.9, 100.4, 99.6, 100.0, 100.3];
        let d = difference(&same, &base).unwrap();
        assert!(d.ci.0 < 0.0 && d.ci.1 > 0.0, "{d:?}");
        assert!(d.p_value > 0.2, "{d:?}");
    }

    /// Against R's `2 * pt(-|t|, df)` and `qt(0.975, df)`.
    #[test]
    fn student_t_matches_published_values() {
        for (t, df, p) in [(2.0, 10.0, 0.07338803), (1.0, 3.0, 0.3910022), (5.0, 4.0, 0.0074904), (0.0, 7.0, 1.0)] {
            assert!((student_t_p(t, df) - p).abs() < 1e-5, "t {t} df {df}: {}", student_t_p(t, df));
        }
        assert!((student_t_quantile(0.05, 10.0) - 2.228139).abs() < 1e-5);
        assert!((student_t_quantile(0.05, 1e6) - 1.959964).abs() < 1e-4);
    }
}

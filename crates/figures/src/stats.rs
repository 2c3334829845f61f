//! Statistics of repeated measurements: a cell's typical value with its confidence interval, and
//! the difference between a cell and its baseline, paired by round where the runs allow it.
//!
//! Every interval is Student's t on the log scale for positive figures (op/s, µs): run-to-run
//! noise is multiplicative, so a cell is summarised by the geometric mean of its runs and a
//! difference by the geometric mean of its ratios. Under log-normal noise those intervals cover
//! the truth at exactly their level for any number of runs (`tests/statistics.rs` checks it by
//! simulation), where the percentile bootstrap they replace covered 90 % at three runs a side.
//! Figures that can be zero or negative (a count of errors, a CPU difference) are summarised by
//! their mean, and a ratio of means gets Fieller's interval, which says so when the baseline's
//! mean is not clear of zero rather than print a finite interval. Nothing here is random, so the
//! same result set always gives the same report.

/// What the repetitions of one metric of one cell looked like.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    /// The runs' typical value: their geometric mean where every value is positive, else their
    /// mean. It is what the CI is about and what differences are ratios of.
    pub center: f64,
    pub mean: f64,
    pub stddev: f64,
    /// Coefficient of variation (stddev / mean), as a percentage.
    pub cv_pct: f64,
    pub min: f64,
    pub max: f64,
    /// 95 % confidence interval of `center`; `None` below `MIN_RUNS_FOR_CI` runs.
    pub ci: Option<(f64, f64)>,
}

impl Summary {
    /// Half the CI's width relative to the center, in percent: "± x %" (infinite without a CI).
    pub fn ci_half_width_pct(&self) -> f64 {
        match self.ci {
            Some((lo, hi)) if self.center != 0.0 => (hi - lo) / 2.0 / self.center.abs() * 100.0,
            _ => f64::INFINITY,
        }
    }
}

/// Confidence level of every interval isobench reports.
pub const LEVEL: f64 = 0.95;
/// Runs a t interval needs to estimate the spread at all.
pub const MIN_RUNS_FOR_CI: usize = 2;

pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let (mean, stddev) = mean_sd(values);
    let min = values.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let (center, ci) = match log_values(values) {
        Some(logs) => {
            let (m, s) = mean_sd(&logs);
            (m.exp(), t_interval(m, s / (n as f64).sqrt(), n as f64 - 1.0).map(|(lo, hi)| (lo.exp(), hi.exp())))
        }
        None => (mean, t_interval(mean, stddev / (n as f64).sqrt(), n as f64 - 1.0)),
    };
    Some(Summary {
        n,
        median: median(values),
        // exp(ln x) rounds: equal runs must give their own value back, not one an ulp off.
        center: center.clamp(min, max),
        mean,
        stddev,
        cv_pct: if mean != 0.0 { stddev / mean.abs() * 100.0 } else { 0.0 },
        min,
        max,
        ci,
    })
}

pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The mean and the sample standard deviation (0 for one value).
pub fn mean_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = if values.len() > 1 { values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (mean, var.sqrt())
}

/// The natural logarithms, where every value is positive and finite.
fn log_values(values: &[f64]) -> Option<Vec<f64>> {
    values.iter().all(|v| *v > 0.0 && v.is_finite()).then(|| values.iter().map(|v| v.ln()).collect())
}

/// `estimate ± t·se` at `LEVEL` with `df` degrees of freedom; `None` without any.
fn t_interval(estimate: f64, se: f64, df: f64) -> Option<(f64, f64)> {
    (df >= 1.0 && se.is_finite()).then(|| {
        let half = t_critical(df) * se;
        (estimate - half, estimate + half)
    })
}

/// The two-sided `LEVEL` quantile of Student's t, remembered per `df` (a report asks for the
/// same few again and again).
pub fn t_critical(df: f64) -> f64 {
    thread_local! {
        static KNOWN: std::cell::RefCell<std::collections::HashMap<u64, f64>> = Default::default();
    }
    KNOWN.with(|known| *known.borrow_mut().entry(df.to_bits()).or_insert_with(|| student_t_quantile(1.0 - LEVEL, df)))
}

/// Windows a run needs before its warm-up can be told from its noise.
pub const MIN_WINDOWS_FOR_WARMUP: usize = 12;

/// How many of a run's first windows are its warm-up: MSER's truncation point (White, 1997), the
/// cut that leaves the rest's mean with the smallest standard error, searched over the first
/// half. A run with a transient start (a JIT compiling) loses those windows; a steady one mostly
/// none, and at worst a few that do not move its mean. None below `MIN_WINDOWS_FOR_WARMUP`.
pub fn warmup_windows(values: &[f64]) -> usize {
    let n = values.len();
    if n < MIN_WINDOWS_FOR_WARMUP {
        return 0;
    }
    // Each cut's score from the windows after it, gathered from the end (Welford's running mean
    // and sum of squared deviations): one pass, so a run of days of windows costs what its
    // windows do, not their square.
    let mut scores = vec![0.0; n / 2 + 1];
    let (mut count, mut mean, mut squares) = (0.0, 0.0, 0.0);
    for d in (0..n).rev() {
        count += 1.0;
        let delta = values[d] - mean;
        mean += delta / count;
        squares += delta * (values[d] - mean);
        if let Some(score) = scores.get_mut(d) {
            *score = squares / (count * count);
        }
    }
    (0..scores.len()).min_by(|a, b| scores[*a].total_cmp(&scores[*b])).unwrap_or(0)
}

/// How a difference was estimated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pairing {
    /// From each round's ratio of the cell's run to the baseline's run of the same block:
    /// what the machine did in that minute is in both and cancels.
    Paired,
    /// From the two sides' runs as two independent samples (pairs broken by a failed run, a
    /// merge or a resume, or runs made before blocks).
    Unpaired,
}

impl Pairing {
    pub fn name(self) -> &'static str {
        match self {
            Pairing::Paired => "paired",
            Pairing::Unpaired => "unpaired",
        }
    }
}

/// How a cell compares with its baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// cell / baseline: the geometric mean of the paired ratios, or the ratio of the two
    /// sides' centers.
    pub ratio: f64,
    /// (ratio − 1) in percent.
    pub pct: f64,
    /// 95 % CI of `pct`; `None` where the runs cannot support one (fewer than two a side, or a
    /// baseline whose mean is not clear of zero).
    pub ci: Option<(f64, f64)>,
    /// Two-sided p-value of "no difference" from the same t statistic as the CI, so that
    /// p < 0.05 exactly when the CI excludes 0.
    pub p_value: f64,
    pub pairing: Pairing,
    /// Pairs, or the smaller side's runs.
    pub n: usize,
}

/// The difference from rounds' pairs `(cell, baseline)`, each measured in the same block.
pub fn paired_difference(pairs: &[(f64, f64)]) -> Option<Difference> {
    let n = pairs.len();
    if n == 0 {
        return None;
    }
    let (cell, base): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    if let (Some(lc), Some(lb)) = (log_values(&cell), log_values(&base)) {
        let d: Vec<f64> = lc.iter().zip(&lb).map(|(c, b)| c - b).collect();
        let (m, s) = mean_sd(&d);
        return Some(on_log_scale(m, s / (n as f64).sqrt(), n as f64 - 1.0, Pairing::Paired, n));
    }
    // Fieller: the ratio ρ of the means is in the CI where c − ρb is not significantly nonzero.
    let (mc, sc) = mean_sd(&cell);
    let (mb, sb) = mean_sd(&base);
    let cov = if n > 1 {
        cell.iter().zip(&base).map(|(c, b)| (c - mc) * (b - mb)).sum::<f64>() / (n as f64 - 1.0)
    } else {
        0.0
    };
    let nf = n as f64;
    fieller(mc, mb, sc * sc / nf, cov / nf, sb * sb / nf, nf - 1.0, Pairing::Paired, n)
}

/// The difference between two independent samples (Welch's t).
pub fn unpaired_difference(cell: &[f64], baseline: &[f64]) -> Option<Difference> {
    if cell.is_empty() || baseline.is_empty() {
        return None;
    }
    let n = cell.len().min(baseline.len());
    let (nc, nb) = (cell.len() as f64, baseline.len() as f64);
    if let (Some(lc), Some(lb)) = (log_values(cell), log_values(baseline)) {
        let ((mc, sc), (mb, sb)) = (mean_sd(&lc), mean_sd(&lb));
        let (vc, vb) = (sc * sc / nc, sb * sb / nb);
        return Some(on_log_scale(mc - mb, (vc + vb).sqrt(), welch_df(vc, nc, vb, nb), Pairing::Unpaired, n));
    }
    let ((mc, sc), (mb, sb)) = (mean_sd(cell), mean_sd(baseline));
    let (vc, vb) = (sc * sc / nc, sb * sb / nb);
    fieller(mc, mb, vc, 0.0, vb, welch_df(vc, nc, vb, nb), Pairing::Unpaired, n)
}

/// Welch–Satterthwaite degrees of freedom of a difference of two means with squared standard
/// errors `vc` and `vb` (0 where a side has a single run: no spread to estimate).
fn welch_df(vc: f64, nc: f64, vb: f64, nb: f64) -> f64 {
    if nc < 2.0 || nb < 2.0 {
        return 0.0;
    }
    let denominator = vc * vc / (nc - 1.0) + vb * vb / (nb - 1.0);
    if denominator == 0.0 { nc + nb - 2.0 } else { (vc + vb).powi(2) / denominator }
}

/// A difference of logarithms `d` with standard error `se`, as a ratio with its CI and p-value.
fn on_log_scale(d: f64, se: f64, df: f64, pairing: Pairing, n: usize) -> Difference {
    let pct = |x: f64| (x.exp() - 1.0) * 100.0;
    let ci = t_interval(d, se, df).map(|(lo, hi)| (pct(lo), pct(hi)));
    let p_value = if df < 1.0 {
        1.0
    } else if se == 0.0 {
        if d == 0.0 { 1.0 } else { 0.0 }
    } else {
        student_t_p(d / se, df)
    };
    Difference { ratio: d.exp(), pct: pct(d), ci, p_value, pairing, n }
}

/// Fieller's interval for the ratio `mc / mb` of two means whose estimates have variances `vc`,
/// `vb` and covariance `cov`. Unbounded (no CI) when `mb` is not clear of zero.
#[allow(clippy::too_many_arguments)]
fn fieller(mc: f64, mb: f64, vc: f64, cov: f64, vb: f64, df: f64, pairing: Pairing, n: usize) -> Option<Difference> {
    if mb == 0.0 || !mb.is_finite() {
        return None;
    }
    let ratio = mc / mb;
    let mut ci = None;
    if df >= 1.0 {
        let t2 = t_critical(df).powi(2);
        let (a, b, c) = (mb * mb - t2 * vb, mc * mb - t2 * cov, mc * mc - t2 * vc);
        let disc = b * b - a * c;
        if a > 0.0 && disc >= 0.0 {
            let root = disc.sqrt();
            ci = Some((((b - root) / a - 1.0) * 100.0, ((b + root) / a - 1.0) * 100.0));
        }
    }
    // The same statistic at ρ = 1, so that the p-value and the CI agree.
    let se = (vc - 2.0 * cov + vb).max(0.0).sqrt();
    let p_value = match (df >= 1.0, se > 0.0) {
        (false, _) => 1.0,
        (true, true) => student_t_p((mc - mb) / se, df),
        (true, false) => f64::from(u8::from(mc == mb)),
    };
    Some(Difference { ratio, pct: (ratio - 1.0) * 100.0, ci, p_value, pairing, n })
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

/// The t with `df` degrees of freedom whose two-sided p-value is `p` (bisection on `student_t_p`,
/// in a bracket found by doubling, to a relative 1e-12).
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 2.0);
    while student_t_p(hi, df) > p && hi < 1e12 {
        (lo, hi) = (hi, hi * 2.0);
    }
    while hi - lo > 1e-12 * hi {
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
        let geometric = (2.0f64 * 4.0 * 4.0 * 4.0 * 5.0 * 5.0 * 7.0 * 9.0).powf(1.0 / 8.0);
        assert!((s.center - geometric).abs() < 1e-9);
        let (lo, hi) = s.ci.unwrap();
        assert!(lo < s.center && s.center < hi);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert!(summarize(&[]).is_none());
        assert_eq!(summarize(&[5.0]).unwrap().ci, None, "one run shows no spread");
    }

    /// R: t.test(log(c), log(b), paired = TRUE) and t.test(log(c), log(b)) (Welch).
    #[test]
    fn differences_match_the_t_tests_on_the_logarithms() {
        let base = [100.0, 104.0, 97.0, 101.0];
        let cell = [80.0, 85.0, 76.0, 79.0];
        let pairs: Vec<(f64, f64)> = cell.iter().copied().zip(base.iter().copied()).collect();
        let d = paired_difference(&pairs).unwrap();
        // mean of log ratios -0.22522, sd 0.01465, t(3) quantile 3.182446.
        let logs: Vec<f64> = pairs.iter().map(|(c, b)| (c / b).ln()).collect();
        let (m, s) = mean_sd(&logs);
        let half = 3.182446 * s / 2.0;
        let (lo, hi) = d.ci.unwrap();
        assert!((d.pct - (m.exp() - 1.0) * 100.0).abs() < 1e-9);
        assert!((lo - ((m - half).exp() - 1.0) * 100.0).abs() < 1e-4, "{d:?}");
        assert!((hi - ((m + half).exp() - 1.0) * 100.0).abs() < 1e-4, "{d:?}");
        assert!(d.p_value < 0.001 && d.pairing == Pairing::Paired && d.n == 4);
        let u = unpaired_difference(&cell, &base).unwrap();
        assert!((u.pct - d.pct).abs() < 1e-9, "every round paired: the same estimate");
        assert!(u.ci.unwrap().0 < lo, "pairing removes the rounds' shared part: {u:?}");
    }

    /// A rate that climbs for a third of the run loses that third; a steady one nothing that
    /// moves its mean; a short one is left alone.
    #[test]
    fn the_warmup_is_the_start_that_differs_from_the_rest() {
        let mut rng = Rng::new(5);
        let mut noisy = |base: f64| base * (1.0 + 0.03 * rng.normal());
        let climbing: Vec<f64> =
            (0..24).map(|i| noisy(if i < 8 { 1500.0 + 300.0 * i as f64 } else { 4200.0 })).collect();
        let cut = warmup_windows(&climbing);
        assert!((7..=9).contains(&cut), "cut {cut} of {climbing:?}");
        let steady: Vec<f64> = (0..24).map(|_| noisy(4200.0)).collect();
        let cut = warmup_windows(&steady);
        let (all, rest) = (mean_sd(&steady).0, mean_sd(&steady[cut..]).0);
        assert!((rest / all - 1.0).abs() < 0.01, "a steady run's cut ({cut}) barely moves its mean");
        assert_eq!(warmup_windows(&climbing[..7]), 0, "too few windows to tell");
    }

    /// The one-pass cut is MSER's as defined: each cut's rest's squared deviations over its
    /// length squared, the smallest over the first half.
    #[test]
    fn the_warmup_cut_is_the_definitions() {
        let mut rng = Rng::new(11);
        for n in [12, 13, 40, 301] {
            let values: Vec<f64> =
                (0..n).map(|i| 2000.0 * (1.0 - (-(i as f64) / 9.0).exp()) * (1.0 + 0.05 * rng.normal())).collect();
            let score = |d: usize| {
                let rest = &values[d..];
                let mean = rest.iter().sum::<f64>() / rest.len() as f64;
                rest.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (rest.len() as f64).powi(2)
            };
            let defined = (0..=n / 2).min_by(|a, b| score(*a).total_cmp(&score(*b))).unwrap();
            assert_eq!(warmup_windows(&values), defined, "{n} windows");
        }
    }

    /// A verdict, its interval and its p-value come from one statistic: they always agree.
    #[test]
    fn the_p_value_is_below_5_percent_exactly_when_the_ci_excludes_0() {
        let mut rng = Rng::new(7);
        for trial in 0..2000 {
            let n = 2 + trial % 6;
            let shift = 0.05 * (trial % 5) as f64;
            let pairs: Vec<(f64, f64)> = (0..n)
                .map(|_| ((shift + 0.05 * rng.normal()).exp() * 100.0, (0.05 * rng.normal()).exp() * 100.0))
                .collect();
            let (cell, base): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
            for d in [paired_difference(&pairs).unwrap(), unpaired_difference(&cell, &base).unwrap()] {
                let (lo, hi) = d.ci.unwrap();
                let excludes = lo > 0.0 || hi < 0.0;
                assert_eq!(excludes, d.p_value < 0.05, "trial {trial}: {d:?}");
            }
        }
    }

    /// Figures that can be zero get Fieller's interval of the ratio of means, and none where the
    /// baseline's mean is not clear of zero.
    #[test]
    fn a_ratio_of_means_that_may_be_zero_gets_fiellers_interval() {
        let d = unpaired_difference(&[0.0, 2.0, 4.0, 2.0], &[10.0, 11.0, 9.0, 10.0]).unwrap();
        assert!((d.ratio - 0.2).abs() < 1e-12);
        let (lo, hi) = d.ci.unwrap();
        assert!(lo < -80.0 && hi > -80.0 && hi < 0.0, "{d:?}");
        let d = unpaired_difference(&[1.0, 2.0, 3.0], &[-1.0, 0.0, 2.0]).unwrap();
        assert_eq!(d.ci, None, "a baseline mean of 0.33 ± 1.5 cannot divide");
        assert!(unpaired_difference(&[1.0], &[0.0, 0.0]).is_none());
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

//! The random number generators cassandra-stress's data comes from, reproduced bit for bit so
//! that isobench writes the same rows for the same seeds (and validates rows either tool wrote):
//! `java.util.Random` (the `JDKRandomGenerator` behind its distributions), its xorshift
//! `FasterRandom`, and the 64-bit MurmurHash3 it salts generators with.

/// `java.util.Random`: a 48-bit linear congruential generator.
#[derive(Clone, Debug)]
pub struct JavaRandom {
    seed: i64,
    next_gaussian: Option<f64>,
}

const MULTIPLIER: i64 = 0x5_DEEC_E66D;
const MASK: i64 = (1 << 48) - 1;

impl JavaRandom {
    pub fn new(seed: i64) -> JavaRandom {
        let mut r = JavaRandom { seed: 0, next_gaussian: None };
        r.set_seed(seed);
        r
    }

    pub fn set_seed(&mut self, seed: i64) {
        self.seed = (seed ^ MULTIPLIER) & MASK;
        self.next_gaussian = None;
    }

    fn next(&mut self, bits: u32) -> i32 {
        self.seed = (self.seed.wrapping_mul(MULTIPLIER).wrapping_add(0xB)) & MASK;
        (self.seed >> (48 - bits)) as i32
    }

    pub fn next_long(&mut self) -> i64 {
        ((self.next(32) as i64) << 32).wrapping_add(self.next(32) as i64)
    }

    pub fn next_double(&mut self) -> f64 {
        let high = (self.next(26) as i64) << 27;
        (high + self.next(27) as i64) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// The polar method, with the second value kept for the next call, as Java does.
    pub fn next_gaussian(&mut self) -> f64 {
        if let Some(g) = self.next_gaussian.take() {
            return g;
        }
        loop {
            let v1 = 2.0 * self.next_double() - 1.0;
            let v2 = 2.0 * self.next_double() - 1.0;
            let s = v1 * v1 + v2 * v2;
            if s < 1.0 && s != 0.0 {
                // StrictMath.log and sqrt: IEEE results, as Rust's.
                let multiplier = (-2.0 * s.ln() / s).sqrt();
                self.next_gaussian = Some(v2 * multiplier);
                return v1 * multiplier;
            }
        }
    }
}

/// cassandra-stress's `FasterRandom`: xorshift, reseeded from `java.util.Random` every 32 draws.
#[derive(Clone, Debug)]
pub struct FasterRandom {
    random: JavaRandom,
    seed: i64,
    reseed: u32,
}

impl FasterRandom {
    pub fn new(seed: i64) -> FasterRandom {
        let mut r = FasterRandom { random: JavaRandom::new(0), seed, reseed: 0 };
        r.rollover();
        r
    }

    fn rollover(&mut self) {
        self.reseed = 0;
        self.random.set_seed(self.seed);
        self.seed = self.random.next_long();
    }

    pub fn next_long(&mut self) -> i64 {
        self.reseed += 1;
        if self.reseed == 32 {
            self.rollover();
        }
        let mut s = self.seed;
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        self.seed = s;
        s.wrapping_mul(2_685_821_657_736_338_717)
    }
}

/// The first 64 bits of MurmurHash3 x64/128 with seed 0 (for the ASCII names cassandra-stress
/// salts its generators with, Cassandra's variant and the reference agree).
pub fn murmur3_x64_128_first(data: &[u8]) -> i64 {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let fmix = |mut k: u64| {
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^ (k >> 33)
    };
    let (mut h1, mut h2) = (0u64, 0u64);
    let blocks = data.len() / 16;
    for i in 0..blocks {
        let k = |o: usize| u64::from_le_bytes(data[i * 16 + o..i * 16 + o + 8].try_into().expect("8 bytes"));
        let (mut k1, mut k2) = (k(0), k(8));
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1.rotate_left(27).wrapping_add(h2).wrapping_mul(5).wrapping_add(0x52dc_e729);
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2.rotate_left(31).wrapping_add(h1).wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }
    let tail = &data[blocks * 16..];
    let (mut k1, mut k2) = (0u64, 0u64);
    for (i, b) in tail.iter().enumerate() {
        if i < 8 {
            k1 ^= (*b as u64) << (8 * i);
        } else {
            k2 ^= (*b as u64) << (8 * (i - 8));
        }
    }
    if tail.len() > 8 {
        h2 ^= k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
    }
    if !tail.is_empty() {
        h1 ^= k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    }
    h1 ^= data.len() as u64;
    h2 ^= data.len() as u64;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1.wrapping_add(h2) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values the JDK 17 printed for `new Random(42)`: nextLong, nextDouble, nextGaussian twice
    /// (the second from the kept pair), and `new Random(-7).nextLong()`.
    #[test]
    fn java_random_matches_the_jdk() {
        let mut r = JavaRandom::new(42);
        assert_eq!(r.next_long(), -5_025_562_857_975_149_833);
        assert_eq!(r.next_double(), 0.6832234717598454);
        assert_eq!(r.next_gaussian(), -0.9498666368908959);
        assert_eq!(r.next_gaussian(), -1.1069902863993377);
        assert_eq!(JavaRandom::new(-7).next_long(), 4_964_420_944_606_563_203);
    }
}

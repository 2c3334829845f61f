//! The rows of cassandra-stress's predefined tables, from seeds. For seed `s` the partition key
//! is `size` characters drawn from a uniform(1..100B) generator seeded with `s ^ salt("key")`,
//! four bits at a time mapped to '0'..'9' and 'K'..'P' (cassandra-stress's own quirk); the row
//! seed folds the key's bytes (`31 * h + b`); each column's cell comes from a generator seeded
//! with `row_seed ^ salt(column)`: its first draw seeds the size distribution and, negated,
//! a `FasterRandom` whose longs fill the cell little-endian. The result is byte-identical to
//! what cassandra-stress writes, so either tool reads and validates the other's data.

use super::dist::{Dist, DistSpec};
use super::random::{FasterRandom, JavaRandom, murmur3_x64_128_first};

const IDENTITY_MIN: i64 = 1;
const IDENTITY_MAX: i64 = 100_000_000_000;

/// One draw of cassandra-stress's default identity distribution, uniform(1..100B).
fn identity_next(rng: &mut JavaRandom) -> i64 {
    let u = rng.next_double();
    ((u * (IDENTITY_MAX as f64 + 1.0) + (1.0 - u) * IDENTITY_MIN as f64) as i64).clamp(IDENTITY_MIN, IDENTITY_MAX)
}

/// A generator's salt: the first half of MurmurHash3 of its configuration name.
fn salt(name: &str) -> i64 {
    murmur3_x64_128_first(name.as_bytes())
}

/// Generates keys and cells for one table's columns. Holds scratch state: one per worker.
#[derive(Clone, Debug)]
pub struct RowGenerator {
    key_salt: i64,
    key_size: usize,
    column_salts: Vec<i64>,
    sizes: Vec<Dist>,
    identity: JavaRandom,
}

impl RowGenerator {
    pub fn new(key_size: usize, columns: &[String], size: &DistSpec) -> RowGenerator {
        RowGenerator {
            key_salt: salt("randomstrkey"),
            key_size,
            column_salts: columns.iter().map(|c| salt(&format!("randomstr{c}"))).collect(),
            sizes: columns.iter().map(|_| size.sampler(0)).collect(),
            identity: JavaRandom::new(0),
        }
    }

    /// Writes the partition key of `seed` into `key` and returns the row's seed.
    pub fn key(&mut self, seed: i64, key: &mut Vec<u8>) -> i64 {
        self.identity.set_seed(seed ^ self.key_salt);
        // The first draw would seed a size distribution; keys have a fixed size.
        identity_next(&mut self.identity);
        key.clear();
        while key.len() < self.key_size {
            let mut value = identity_next(&mut self.identity) as u64;
            for _ in 0..16 {
                if key.len() == self.key_size {
                    break;
                }
                let nibble = (value & 15) as u8;
                key.push(if nibble < 10 { b'0' + nibble } else { b'A' + nibble });
                value >>= 4;
            }
        }
        key.iter().fold(0i64, |h, b| h.wrapping_mul(31).wrapping_add(*b as i8 as i64))
    }

    /// Writes column `column`'s cell for the row seeded `row_seed` into `cell`.
    pub fn cell(&mut self, column: usize, row_seed: i64, cell: &mut Vec<u8>) {
        self.identity.set_seed(row_seed ^ self.column_salts[column]);
        let seed = identity_next(&mut self.identity);
        let sizes = &mut self.sizes[column];
        sizes.set_seed(seed);
        let size = sizes.sample().max(0) as usize;
        let mut rand = FasterRandom::new(!seed);
        cell.clear();
        cell.resize(size, 0);
        let mut longs = cell.chunks_exact_mut(8);
        for long in &mut longs {
            long.copy_from_slice(&rand.next_long().to_le_bytes());
        }
        let tail = longs.into_remainder();
        if !tail.is_empty() {
            let n = tail.len();
            tail.copy_from_slice(&rand.next_long().to_le_bytes()[..n]);
        }
    }

    pub fn columns(&self) -> usize {
        self.column_salts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Every row cassandra-stress's own generators produced (see tests/fixtures/README.md).
    fn check_fixture(name: &str, key_size: usize, column_size: i64) {
        let text = std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let columns: Vec<String> = (0..5).map(|i| format!("C{i}")).collect();
        let mut g = RowGenerator::new(key_size, &columns, &DistSpec::Fixed(column_size));
        let (mut key, mut cell) = (Vec::new(), Vec::new());
        let mut rows = 0;
        for line in text.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let seed: i64 = fields[0].parse().unwrap();
            let row_seed = g.key(seed, &mut key);
            assert_eq!(hex(&key), fields[1], "key of seed {seed}");
            for (c, expected) in fields[2..].iter().enumerate() {
                g.cell(c, row_seed, &mut cell);
                assert_eq!(hex(&cell), *expected, "C{c} of seed {seed}");
            }
            rows += 1;
        }
        assert!(rows >= 20);
    }

    #[test]
    fn rows_are_byte_identical_to_cassandra_stress() {
        check_fixture("cassandra-stress-rows-default.txt", 10, 34);
        check_fixture("cassandra-stress-rows-key20-col100.txt", 20, 100);
    }

    #[test]
    fn the_first_key_is_the_familiar_one() {
        let mut g = RowGenerator::new(10, &["C0".into()], &DistSpec::Fixed(34));
        let mut key = Vec::new();
        g.key(1, &mut key);
        assert_eq!(String::from_utf8(key).unwrap(), "0P37709P21");
    }
}

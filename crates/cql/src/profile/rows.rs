//! A profile's partitions and rows, from seeds. Partition `p` (a draw of `-pop`) has key
//! columns from `p`; its clustering columns form a tree whose level `k` has `cluster` values
//! (one draw per partition), so it holds the product of those counts in rows, numbered with the
//! last clustering column fastest. Every value is one draw of its column's `population` seeded
//! by where it sits (the partition, the path to a clustering value, the row), turned into a
//! value of the column's type by [`values::generate`]: rerunning the seeds rebuilds the rows.

use std::sync::Arc;

use scylla::value::CqlValue;

use super::table::{Kind, Table};
use super::values::{self, mix};
use crate::dist::Dist;

pub struct Partition {
    pub seed: i64,
    /// Values per clustering level, in key order.
    pub counts: Vec<u64>,
    pub rows: u64,
}

/// One worker's generators (they hold scratch state).
pub struct Rows {
    pub table: Arc<Table>,
    populations: Vec<Dist>,
    sizes: Vec<Dist>,
    clusters: Vec<Dist>,
    clustering: Vec<usize>,
}

const ROW: i64 = 0x0072_6f77;
const STATIC: i64 = 0x7374_6174_6963;

impl Rows {
    pub fn new(table: Arc<Table>) -> Rows {
        Rows {
            populations: table.columns.iter().map(|c| c.population.sampler(0)).collect(),
            sizes: table.columns.iter().map(|c| c.size.sampler(0)).collect(),
            clusters: table.columns.iter().map(|c| c.cluster.sampler(0)).collect(),
            clustering: table.of_kind(Kind::Clustering).collect(),
            table,
        }
    }

    /// Column `c`'s value at the place seeded `seed`.
    pub fn value(&mut self, c: usize, seed: i64) -> CqlValue {
        let column = &self.table.columns[c];
        self.populations[c].set_seed(seed ^ column.salt);
        let identity = mix(self.populations[c].sample(), column.salt);
        self.sizes[c].set_seed(identity);
        let size = self.sizes[c].sample().max(0) as usize;
        values::generate(&column.typ, identity, size)
    }

    pub fn partition(&mut self, seed: i64) -> Partition {
        let mut counts = Vec::with_capacity(self.clustering.len());
        for &c in &self.clustering {
            self.clusters[c].set_seed(seed ^ self.table.columns[c].salt);
            counts.push(self.clusters[c].sample().max(1) as u64);
        }
        let rows = counts.iter().try_fold(1u64, |a, n| a.checked_mul(*n)).unwrap_or(u64::MAX);
        Partition { seed, counts, rows }
    }

    /// Row `row`'s clustering path: one index per level.
    fn digits(partition: &Partition, mut row: u64) -> Vec<u64> {
        let mut digits = vec![0; partition.counts.len()];
        for (k, n) in partition.counts.iter().enumerate().rev() {
            digits[k] = row % n;
            row /= n;
        }
        digits
    }

    /// Row `row` of the partition, one value per column of the table (None for a counter, whose
    /// value is an increment, not a state).
    pub fn row(&mut self, partition: &Partition, row: u64, out: &mut Vec<Option<CqlValue>>) {
        out.clear();
        let digits = Rows::digits(partition, row);
        let mut path = partition.seed;
        let mut level = 0;
        let row_seed = mix(mix(partition.seed, ROW), row as i64);
        for c in 0..self.table.columns.len() {
            let value = match self.table.columns[c].kind {
                Kind::Partition => self.value(c, partition.seed),
                Kind::Clustering => {
                    path = mix(path, digits[level] as i64);
                    level += 1;
                    self.value(c, path)
                }
                Kind::Static => self.value(c, mix(partition.seed, STATIC)),
                Kind::Regular => self.value(c, row_seed),
            };
            out.push(Some(value));
        }
    }

    /// The row whose clustering values are `clustering` (one per level, in key order), found
    /// level by level; None if no row of the partition has them.
    pub fn find(&mut self, partition: &Partition, clustering: &[Option<CqlValue>]) -> Option<u64> {
        let (mut row, mut path) = (0u64, partition.seed);
        for (level, (&c, want)) in self.clustering.clone().iter().zip(clustering).enumerate() {
            let want = want.as_ref()?;
            let digit = (0..partition.counts[level]).find(|d| &self.value(c, mix(path, *d as i64)) == want)?;
            path = mix(path, digit as i64);
            row = row * partition.counts[level] + digit;
        }
        Some(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::DistSpec;
    use crate::profile::table::Column;
    use scylla::frame::response::result::{ColumnType, NativeType};

    fn column(name: &str, kind: Kind, typ: NativeType, cluster: i64) -> Column {
        Column {
            name: name.into(),
            typ: ColumnType::Native(typ),
            kind,
            size: DistSpec::Uniform { min: 4, max: 8 },
            population: DistSpec::Uniform { min: 1, max: 100_000_000_000 },
            cluster: DistSpec::Fixed(cluster),
            salt: crate::random::murmur3_x64_128_first(name.as_bytes()),
        }
    }

    #[test]
    fn rows_are_rebuilt_from_seeds_and_found_by_their_clustering_values() {
        let table = Arc::new(Table {
            keyspace: "ks".into(),
            name: "t".into(),
            columns: vec![
                column("user", Kind::Partition, NativeType::Text, 1),
                column("day", Kind::Clustering, NativeType::Date, 3),
                column("at", Kind::Clustering, NativeType::Timeuuid, 4),
                column("body", Kind::Regular, NativeType::Text, 1),
            ],
        });
        let mut rows = Rows::new(table.clone());
        let p = rows.partition(17);
        assert_eq!((p.counts.clone(), p.rows), (vec![3, 4], 12));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut seen = std::collections::HashSet::new();
        for r in 0..p.rows {
            rows.row(&p, r, &mut a);
            Rows::new(table.clone()).row(&p, r, &mut b);
            assert_eq!(a, b, "row {r} is the same from a fresh generator");
            assert_eq!(rows.find(&p, &a[1..3]), Some(r));
            seen.insert(format!("{:?}", &a[1..3]));
        }
        assert_eq!(seen.len(), 12, "every row has its own clustering values");
        rows.row(&p, 0, &mut a);
        let mut other = Vec::new();
        let p18 = rows.partition(18);
        rows.row(&p18, 0, &mut other);
        assert_ne!(a[0], other[0], "another partition, another key");
    }
}

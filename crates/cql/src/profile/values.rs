//! A value of any CQL type the driver binds, from an identity (one draw of the column's
//! population) and a size: the same identity always gives the same value, so a row can be
//! regenerated to validate what a read returns. Text is ASCII letters and digits; blobs are
//! random bytes; numbers, dates, addresses and UUIDs are spread over their ranges; a
//! collection's size is its element count; a set's or a map's elements are distinct.

use std::net::{IpAddr, Ipv4Addr};

use scylla::frame::response::result::{CollectionType, ColumnType, NativeType};
use scylla::value::{
    Counter, CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlTimeuuid, CqlValue, CqlVarint,
};

/// splitmix64: a full-period mix, so neighbouring identities give unrelated values.
pub fn mix(a: i64, b: i64) -> i64 {
    let mut z = (a as u64) ^ (b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as i64
}

/// A stream of 64-bit draws from one identity.
struct Draws(i64, i64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.1 += 1;
        mix(self.0, self.1) as u64
    }
}

/// Why a type cannot be generated, or None when it can.
pub fn unsupported(typ: &ColumnType) -> Option<String> {
    match typ {
        ColumnType::Native(_) => None,
        ColumnType::Collection { typ: CollectionType::List(t) | CollectionType::Set(t), .. } => unsupported(t),
        ColumnType::Collection { typ: CollectionType::Map(k, v), .. } => unsupported(k).or_else(|| unsupported(v)),
        ColumnType::Vector { typ, .. } => unsupported(typ),
        ColumnType::Tuple(types) => types.iter().find_map(unsupported),
        ColumnType::UserDefinedType { definition, .. } => {
            definition.field_types.iter().find_map(|(_, t)| unsupported(t))
        }
        other => Some(format!("{other:?}")),
    }
}

/// Elements of a collection nested in a collection or a UDT field: a small, fixed rule.
fn inner_size(identity: i64) -> usize {
    4 + (mix(identity, 7) as u64 % 5) as usize
}

const ALPHANUMERIC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// The value of `typ` for `identity`; `size` counts characters, bytes or elements.
pub fn generate(typ: &ColumnType, identity: i64, size: usize) -> CqlValue {
    let mut d = Draws(identity, 0);
    match typ {
        ColumnType::Native(native) => native_value(native, &mut d, size),
        ColumnType::Collection { typ, .. } => match typ {
            CollectionType::List(t) => CqlValue::List(
                (0..size).map(|i| generate(t, mix(identity, i as i64), inner_size(mix(identity, i as i64)))).collect(),
            ),
            CollectionType::Set(t) => CqlValue::Set(distinct((0..size).map(|i| {
                let e = mix(identity, i as i64);
                generate(t, e, inner_size(e))
            }))),
            CollectionType::Map(k, v) => {
                let keys = distinct((0..size).map(|i| {
                    let e = mix(identity, i as i64);
                    generate(k, e, inner_size(e))
                }));
                CqlValue::Map(
                    keys.into_iter()
                        .enumerate()
                        .map(|(i, key)| {
                            let e = mix(identity, -(i as i64) - 1);
                            (key, generate(v, e, inner_size(e)))
                        })
                        .collect(),
                )
            }
            _ => CqlValue::Empty,
        },
        ColumnType::Vector { typ, dimensions } => CqlValue::Vector(
            (0..*dimensions as i64).map(|i| generate(typ, mix(identity, i), inner_size(mix(identity, i)))).collect(),
        ),
        ColumnType::Tuple(types) => CqlValue::Tuple(
            types
                .iter()
                .enumerate()
                .map(|(i, t)| Some(generate(t, mix(identity, i as i64), inner_size(mix(identity, i as i64)))))
                .collect(),
        ),
        ColumnType::UserDefinedType { definition, .. } => CqlValue::UserDefinedType {
            keyspace: definition.keyspace.to_string(),
            name: definition.name.to_string(),
            fields: definition
                .field_types
                .iter()
                .enumerate()
                .map(|(i, (name, t))| {
                    let e = mix(identity, i as i64);
                    (name.to_string(), Some(generate(t, e, inner_size(e))))
                })
                .collect(),
        },
        _ => CqlValue::Empty,
    }
}

fn distinct(values: impl Iterator<Item = CqlValue>) -> Vec<CqlValue> {
    let mut out: Vec<CqlValue> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

fn native_value(native: &NativeType, d: &mut Draws, size: usize) -> CqlValue {
    match native {
        NativeType::Ascii => CqlValue::Ascii(text(d, size)),
        NativeType::Text => CqlValue::Text(text(d, size)),
        NativeType::Blob => {
            let mut bytes = Vec::with_capacity(size + 8);
            while bytes.len() < size {
                bytes.extend_from_slice(&d.next().to_le_bytes());
            }
            bytes.truncate(size);
            CqlValue::Blob(bytes)
        }
        NativeType::Boolean => CqlValue::Boolean(d.next() & 1 == 1),
        NativeType::TinyInt => CqlValue::TinyInt(d.next() as i8),
        NativeType::SmallInt => CqlValue::SmallInt(d.next() as i16),
        NativeType::Int => CqlValue::Int(d.next() as i32),
        NativeType::BigInt => CqlValue::BigInt(d.next() as i64),
        NativeType::Counter => CqlValue::Counter(Counter(1 + (d.next() % 10) as i64)),
        NativeType::Varint => CqlValue::Varint(CqlVarint::from_signed_bytes_be(minimal_be(d.next() as i64))),
        NativeType::Decimal => {
            CqlValue::Decimal(CqlDecimal::from_signed_be_bytes_and_exponent(minimal_be(d.next() as i64 >> 16), 2))
        }
        // Exactly representable, so what is read back compares equal bit for bit.
        NativeType::Float => CqlValue::Float((d.next() >> 40) as f32 / 1024.0 - 8192.0),
        NativeType::Double => CqlValue::Double((d.next() >> 11) as f64 / 1024.0 - 4.0e12),
        // 2000-01-01 plus up to ~30 years, in milliseconds.
        NativeType::Timestamp => {
            CqlValue::Timestamp(CqlTimestamp(946_684_800_000 + (d.next() % 946_080_000_000) as i64))
        }
        NativeType::Date => CqlValue::Date(CqlDate((1u32 << 31) + 10_957 + (d.next() % 10_950) as u32)),
        NativeType::Time => CqlValue::Time(CqlTime((d.next() % 86_400_000_000_000) as i64)),
        NativeType::Duration => CqlValue::Duration(CqlDuration {
            months: (d.next() % 24) as i32,
            days: (d.next() % 30) as i32,
            nanoseconds: (d.next() % 86_400_000_000_000) as i64,
        }),
        NativeType::Inet => CqlValue::Inet(IpAddr::V4(Ipv4Addr::from(d.next() as u32))),
        NativeType::Uuid => {
            let mut b = uuid_bytes(d);
            b[6] = (b[6] & 0x0f) | 0x40;
            CqlValue::Uuid(uuid::Uuid::from_bytes(b))
        }
        NativeType::Timeuuid => {
            // Version 1 (time-based) and the RFC 4122 variant: what Cassandra accepts for timeuuid.
            let mut b = uuid_bytes(d);
            b[6] = (b[6] & 0x0f) | 0x10;
            CqlValue::Timeuuid(CqlTimeuuid::from_bytes(b))
        }
        _ => CqlValue::Empty,
    }
}

fn uuid_bytes(d: &mut Draws) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&d.next().to_be_bytes());
    b[8..].copy_from_slice(&d.next().to_be_bytes());
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

fn text(d: &mut Draws, size: usize) -> String {
    let mut s = String::with_capacity(size);
    let mut bits = 0u64;
    for i in 0..size {
        if i % 10 == 0 {
            bits = d.next();
        }
        s.push(ALPHANUMERIC[(bits % 62) as usize] as char);
        bits /= 62;
    }
    s
}

/// Two's complement, big-endian, without redundant leading bytes: the form Cassandra returns.
fn minimal_be(n: i64) -> Vec<u8> {
    let bytes = n.to_be_bytes();
    let mut start = 0;
    while start < 7
        && ((bytes[start] == 0 && bytes[start + 1] & 0x80 == 0)
            || (bytes[start] == 0xff && bytes[start + 1] & 0x80 != 0))
    {
        start += 1;
    }
    bytes[start..].to_vec()
}

/// The value as Cassandra returns it, in a form that compares equal to what was written: sets
/// and maps in one order, an empty collection as null (Cassandra stores no empty collection).
pub fn normalized(value: Option<CqlValue>) -> Option<CqlValue> {
    let v = value?;
    let key = |v: &CqlValue| format!("{v:?}");
    Some(match v {
        CqlValue::List(items) | CqlValue::Set(items) if items.is_empty() => return None,
        CqlValue::Map(entries) if entries.is_empty() => return None,
        CqlValue::List(items) => CqlValue::List(items.into_iter().filter_map(|i| normalized(Some(i))).collect()),
        CqlValue::Set(items) => {
            let mut items: Vec<CqlValue> = items.into_iter().filter_map(|i| normalized(Some(i))).collect();
            items.sort_by_key(key);
            CqlValue::Set(items)
        }
        CqlValue::Map(entries) => {
            let mut entries: Vec<(CqlValue, CqlValue)> =
                entries.into_iter().filter_map(|(k, v)| Some((normalized(Some(k))?, normalized(Some(v))?))).collect();
            entries.sort_by_key(|(k, _)| key(k));
            CqlValue::Map(entries)
        }
        CqlValue::Tuple(items) => CqlValue::Tuple(items.into_iter().map(normalized).collect()),
        CqlValue::UserDefinedType { keyspace, name, fields } => CqlValue::UserDefinedType {
            keyspace,
            name,
            fields: fields.into_iter().map(|(n, v)| (n, normalized(v))).collect(),
        },
        other => other,
    })
}

/// A value as a message shows it: short, and text in quotes.
pub fn shown(value: &Option<CqlValue>) -> String {
    let text = match value {
        None => return "null".into(),
        Some(CqlValue::Text(s) | CqlValue::Ascii(s)) => format!("'{s}'"),
        Some(CqlValue::Blob(b)) => format!("0x{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
        Some(other) => format!("{other:?}"),
    };
    let n = text.chars().count();
    if n <= 60 {
        return text;
    }
    let head: String = text.chars().take(57).collect();
    let close = if head.starts_with('\'') { "'" } else { "" };
    format!("{head}…{close} ({n} chars)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_identity_gives_the_same_value() {
        let text = ColumnType::Native(NativeType::Text);
        assert_eq!(generate(&text, 42, 12), generate(&text, 42, 12));
        assert_ne!(generate(&text, 42, 12), generate(&text, 43, 12));
        let CqlValue::Text(s) = generate(&text, 42, 12) else { panic!() };
        assert_eq!(s.len(), 12);
        assert!(s.bytes().all(|b| b.is_ascii_alphanumeric()));
    }

    #[test]
    fn sets_and_maps_hold_distinct_elements_and_compare_in_any_order() {
        let set = ColumnType::Collection {
            frozen: false,
            typ: CollectionType::Set(Box::new(ColumnType::Native(NativeType::Boolean))),
        };
        let CqlValue::Set(items) = generate(&set, 1, 10) else { panic!() };
        assert!(items.len() <= 2, "booleans: at most two distinct");
        let map = ColumnType::Collection {
            frozen: false,
            typ: CollectionType::Map(
                Box::new(ColumnType::Native(NativeType::Int)),
                Box::new(ColumnType::Native(NativeType::Text)),
            ),
        };
        let CqlValue::Map(mut entries) = generate(&map, 5, 4) else { panic!() };
        assert_eq!(entries.len(), 4);
        let original = normalized(Some(CqlValue::Map(entries.clone())));
        entries.reverse();
        assert_eq!(normalized(Some(CqlValue::Map(entries))), original);
        assert_eq!(normalized(Some(CqlValue::List(vec![]))), None, "Cassandra returns an empty collection as null");
    }

    #[test]
    fn numbers_take_the_form_cassandra_returns() {
        assert_eq!(minimal_be(0), [0]);
        assert_eq!(minimal_be(127), [0x7f]);
        assert_eq!(minimal_be(128), [0, 0x80]);
        assert_eq!(minimal_be(-1), [0xff]);
        assert_eq!(minimal_be(-129), [0xff, 0x7f]);
        let CqlValue::Timeuuid(t) = generate(&ColumnType::Native(NativeType::Timeuuid), 9, 0) else { panic!() };
        assert_eq!(t.as_bytes()[6] >> 4, 1, "version 1");
    }
}

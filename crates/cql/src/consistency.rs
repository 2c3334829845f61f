//! Consistency levels by their CQL names, as `cl=` and a profile's queries give them.

use scylla::statement::{Consistency, SerialConsistency};

pub const CONSISTENCY: &[&str] = &[
    "ONE",
    "QUORUM",
    "LOCAL_QUORUM",
    "EACH_QUORUM",
    "ALL",
    "ANY",
    "TWO",
    "THREE",
    "LOCAL_ONE",
    "SERIAL",
    "LOCAL_SERIAL",
];

pub fn consistency(name: &str) -> Consistency {
    match name {
        "ANY" => Consistency::Any,
        "ONE" => Consistency::One,
        "TWO" => Consistency::Two,
        "THREE" => Consistency::Three,
        "QUORUM" => Consistency::Quorum,
        "ALL" => Consistency::All,
        "LOCAL_QUORUM" => Consistency::LocalQuorum,
        "EACH_QUORUM" => Consistency::EachQuorum,
        "SERIAL" => Consistency::Serial,
        "LOCAL_SERIAL" => Consistency::LocalSerial,
        _ => Consistency::LocalOne,
    }
}

pub fn serial_consistency(name: &str) -> SerialConsistency {
    if name == "LOCAL_SERIAL" { SerialConsistency::LocalSerial } else { SerialConsistency::Serial }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_consistency_the_command_line_accepts_reaches_the_driver_as_itself() {
        for name in CONSISTENCY {
            let level = consistency(name);
            assert_eq!(format!("{level:?}").to_ascii_uppercase(), name.replace('_', ""), "cl={name}");
        }
        assert_eq!(serial_consistency("LOCAL_SERIAL"), SerialConsistency::LocalSerial);
        assert_eq!(serial_consistency("SERIAL"), SerialConsistency::Serial);
    }
}

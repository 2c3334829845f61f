//! The environment variables a loader is handed its seed and its secrets by: command lines are
//! visible to every user of the machine, a process's environment is not.

/// The environment variable that seeds a loader's draws (instead of its process id).
pub const SEED_VAR: &str = "ISOBENCH_CQL_SEED";
/// The environment variable that hands a loader its password: command lines are visible to
/// every user of the machine.
pub const PASSWORD_VAR: &str = "ISOBENCH_CQL_PASSWORD";
pub const TRUSTSTORE_PASSWORD_VAR: &str = "ISOBENCH_CQL_TRUSTSTORE_PASSWORD";
pub const KEYSTORE_PASSWORD_VAR: &str = "ISOBENCH_CQL_KEYSTORE_PASSWORD";

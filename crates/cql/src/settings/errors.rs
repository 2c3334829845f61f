//! `-errors` (`SettingsErrors.java`).

use super::ArgError;
use super::tokens::{Params, number};

#[derive(Clone, Debug)]
pub struct Errors {
    pub ignore: bool,
    pub retries: u32,
    pub skip_read_validation: bool,
}

pub(super) fn parse_errors(params: Option<Params>) -> Result<Errors, ArgError> {
    let mut errors = Errors { ignore: false, retries: 9, skip_read_validation: false };
    let Some(mut p) = params else { return Ok(errors) };
    errors.ignore = p.flag("ignore");
    if let Some(r) = p.take("retries=") {
        errors.retries = number(&p, "retries=", &r)?;
    }
    errors.skip_read_validation = p.flag("skip-read-validation");
    p.flag("fail-fast");
    p.finish("ignore, retries=, skip-read-validation")?;
    Ok(errors)
}

//! `-node` and `-port` (`SettingsNode.java`, `SettingsPort.java`): where the cluster is.

use super::ArgError;
use super::tokens::{Params, number};

/// The nodes to contact: a list, or a file of one per line; `localhost` when not given.
pub(super) fn parse_node(params: Option<Params>, warnings: &mut Vec<String>) -> Result<Vec<String>, ArgError> {
    let mut nodes = vec!["localhost".to_string()];
    let Some(mut p) = params else { return Ok(nodes) };
    if let Some(file) = p.take("file=") {
        let text = std::fs::read_to_string(&file).map_err(|e| ArgError::Invalid(format!("-node file={file}: {e}")))?;
        nodes = text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
    }
    p.flag("whitelist");
    if let Some(dc) = p.take("datacenter=") {
        warnings
            .push(format!("-node datacenter={dc} is accepted and ignored: the driver routes to every node it knows"));
    }
    let list: Vec<String> = p.items.drain(..).filter(|i| !i.contains('=')).collect();
    if !list.is_empty() {
        nodes = list.iter().flat_map(|l| l.split(',')).filter(|s| !s.is_empty()).map(str::to_string).collect();
    }
    p.finish("a,b,c, file=, whitelist, datacenter=")?;
    Ok(nodes)
}

/// The native protocol's port (9042 unless given); thrift= and jmx= are accepted and unused.
pub(super) fn parse_port(params: Option<Params>) -> Result<u16, ArgError> {
    let mut native_port = 9042;
    if let Some(mut p) = params {
        if let Some(n) = p.take("native=") {
            native_port = number(&p, "native=", &n)?;
        }
        p.take("thrift=");
        p.take("jmx=");
        p.finish("native=, thrift=, jmx=")?;
    }
    Ok(native_port)
}

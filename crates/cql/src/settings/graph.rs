//! `-graph` (`SettingsGraph.java`).

use std::path::PathBuf;

use super::ArgError;
use super::tokens::Params;

#[derive(Clone, Debug)]
pub struct Graph {
    pub file: PathBuf,
    pub revision: String,
    pub title: Option<String>,
    pub op: Option<String>,
}

pub(super) fn parse_graph(params: Option<Params>) -> Result<Option<Graph>, ArgError> {
    let Some(mut p) = params else { return Ok(None) };
    let file = p.take("file=").ok_or_else(|| p.invalid("file= is required, e.g. -graph file=stress.html"))?;
    let graph = Graph {
        file: PathBuf::from(file),
        revision: p.take("revision=").unwrap_or_else(|| "unknown".into()),
        title: p.take("title="),
        op: p.take("op="),
    };
    p.finish("file=, revision=, title=, op=")?;
    Ok(Some(graph))
}

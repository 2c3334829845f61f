//! The server's own view of a run, read over CQL from Cassandra's virtual tables (what
//! `nodetool tablestats` would say): the table's size on disk and the node-local read and
//! write latencies. A table a server version lacks is skipped.

use std::time::Duration;

use anyhow::Result;
use scylla::client::session::Session;

use crate::store::Sample;
use crate::workload::cql::Cql;
use cql_stress::{engine, schema};

/// Samples for the measured phase's table; empty when the server has no such tables.
pub fn after_run(load: &Cql) -> Vec<Sample> {
    let Ok(settings) = load.phase(&load.args) else { return Vec::new() };
    let keyspace = settings.schema.keyspace.clone();
    let table = schema::table(settings.command.ops[0].0);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(_) => return Vec::new(),
    };
    runtime.block_on(async {
        let Ok(session) = engine::connect(&settings).await else { return Vec::new() };
        let mut samples = Vec::new();
        if let Ok(Some(mib)) = single_f64(
            &session,
            "SELECT mebibytes FROM system_views.disk_usage WHERE keyspace_name = ? AND table_name = ?",
            &keyspace,
            table,
        )
        .await
            // Whole mebibytes: a smaller table reads 0, which says nothing.
            && mib > 0.0
        {
            samples.push(Sample::new("server_table_size", mib * 1024.0 * 1024.0, "B"));
        }
        for (kind, metric) in [("read", "server_local_read"), ("write", "server_local_write")] {
            let query = format!(
                "SELECT p50th_ms, p99th_ms FROM system_views.local_{kind}_latency WHERE keyspace_name = ? AND table_name = ?"
            );
            // All zeros: the node saw no such operations recently (its histograms decay).
            if let Ok(Some((p50, p99))) = pair_f64(&session, &query, &keyspace, table).await
                && p99 > 0.0
            {
                samples.push(Sample::new(format!("{metric}_p50"), p50 * 1000.0, "us"));
                samples.push(Sample::new(format!("{metric}_p99"), p99 * 1000.0, "us"));
            }
        }
        samples
    })
}

async fn rows(session: &Session, query: &str, keyspace: &str, table: &str) -> Result<Vec<Vec<Option<f64>>>> {
    let mut statement = scylla::statement::unprepared::Statement::new(query);
    statement.set_request_timeout(Some(Duration::from_secs(5)));
    let result = session.query_unpaged(statement, (keyspace, table)).await?.into_rows_result()?;
    let mut out = Vec::new();
    for row in result.rows::<scylla::value::Row>()? {
        out.push(row?.columns.into_iter().map(|c| c.and_then(|v| number(&v))).collect());
    }
    Ok(out)
}

fn number(v: &scylla::value::CqlValue) -> Option<f64> {
    use scylla::value::CqlValue::*;
    match v {
        Double(d) => Some(*d),
        Float(f) => Some(*f as f64),
        BigInt(i) => Some(*i as f64),
        Int(i) => Some(*i as f64),
        _ => None,
    }
}

async fn single_f64(session: &Session, query: &str, keyspace: &str, table: &str) -> Result<Option<f64>> {
    Ok(rows(session, query, keyspace, table).await?.first().and_then(|r| r.first().copied().flatten()))
}

async fn pair_f64(session: &Session, query: &str, keyspace: &str, table: &str) -> Result<Option<(f64, f64)>> {
    let rows = rows(session, query, keyspace, table).await?;
    Ok(rows.first().and_then(|r| Some((r.first().copied().flatten()?, r.get(1).copied().flatten()?))))
}

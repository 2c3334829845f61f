//! `isobench k8s render SUITE`: the objects each k8s cell's run would apply, as YAML that
//! `kubectl apply -f` takes (the request's secrets shown as REDACTED).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde_json::Value;

use crate::agent;
use crate::env::k8s::{K8s, manifest, statefulset};
use crate::plan::Plan;
use crate::server::ServerSpec;
use crate::suite::Suite;
use crate::volume::RawTarget;
use crate::workload::Spec;

impl K8s {
    /// One run's objects as YAML documents.
    pub fn render(
        &self,
        pod: &manifest::PodSettings,
        request: &agent::Request,
        claim: Option<&crate::volume::pvc::Claim>,
        name: &str,
    ) -> Result<String> {
        let (request, loaders) = self.pod_request(request);
        let mut shown = serde_json::to_value(&request)?;
        redact(&mut shown);
        let mut objects = manifest::objects(pod, name, "RUN", String::new(), claim, loaders, Duration::ZERO);
        objects.secret.data = None;
        objects.secret.string_data =
            Some(BTreeMap::from([("request.json".to_string(), serde_json::to_string_pretty(&shown)?)]));
        if let Some(spec) = objects.job.spec.as_mut() {
            spec.active_deadline_seconds = Some(request.workload.workload().timeout().as_secs() as i64 + 180);
        }
        let mut docs = vec![typed(&objects.secret, "v1", "Secret")?];
        if let Some(claim) = &objects.claim {
            docs.push(typed(claim, "v1", "PersistentVolumeClaim")?);
        }
        docs.push(typed(&objects.job, "batch/v1", "Job")?);
        Ok(serde_saphyr::to_string_multiple(&docs)?)
    }
}

/// An object with its apiVersion and kind first, as manifests have them.
fn typed<T: serde::Serialize>(object: &T, api_version: &str, kind: &str) -> Result<Value> {
    let mut map = serde_json::Map::new();
    map.insert("apiVersion".into(), api_version.into());
    map.insert("kind".into(), kind.into());
    if let Value::Object(fields) = serde_json::to_value(object)? {
        map.extend(fields.into_iter().filter(|(k, _)| k != "apiVersion" && k != "kind"));
    }
    Ok(Value::Object(map))
}

/// Secrets out of the request: keys that name one, and cassandra-stress's `password=`.
fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if crate::suite::is_secret_key(key) && !v.is_null() {
                    *v = Value::String("REDACTED".into());
                } else {
                    redact(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        Value::String(text) if text.to_ascii_lowercase().contains("password") => {
            *text = cql_stress::redacted(std::slice::from_ref(text));
        }
        _ => {}
    }
}

/// A database's Secret (its password redacted), Service and StatefulSet, as YAML documents.
fn database(mut db: statefulset::DbObjects) -> Result<String> {
    db.secret.string_data = db.secret.data.take().map(|data| {
        data.into_iter()
            .map(|(key, value)| {
                let shown = match key.as_str() {
                    statefulset::PASSWORD_KEY => "REDACTED".to_string(),
                    _ => String::from_utf8_lossy(&value.0).into_owned(),
                };
                (key, shown)
            })
            .collect()
    });
    let mut out = String::new();
    for object in [
        typed(&db.secret, "v1", "Secret")?,
        typed(&db.service, "v1", "Service")?,
        typed(&db.set, "apps/v1", "StatefulSet")?,
    ] {
        out.push_str(&serde_saphyr::to_string(&object)?);
        out.push_str("---\n");
    }
    Ok(out)
}

/// Every k8s cell of the suite, its objects under a comment naming the cell.
pub fn render_suite(suite: &Suite, plan: &Plan) -> Result<String> {
    let mut out = String::new();
    for (i, cell) in plan.cells.iter().enumerate() {
        let Some(k8s) = suite.envs[cell.env].item.as_k8s() else { continue };
        let volume = &suite.volumes[cell.volume].item;
        let mut spec = suite.workloads[cell.workload].variants[cell.variant].spec.clone();
        if let (Some(ServerSpec::External(external)), Spec::Cql(cql)) = (suite.server(cell.workload), &mut spec) {
            cql.target = Some(external.target.clone());
        }
        let claim = volume.claim();
        let name = crate::env::k8s::object_name(Path::new(&format!("RUN-{}", i + 1)));
        out.push_str(&format!("# cell {} (run {}: objects are named after each run)\n", cell.id, i + 1));
        let mut avoid = None;
        if let (Some(ServerSpec::Managed(managed)), Spec::Cql(cql), Some(claim)) =
            (suite.server(cell.workload), &mut spec, &claim)
        {
            // The database, then its loaders (whose -node are the pods' addresses at run time).
            out.push_str(&database(super::k8s_server_cell::database_objects(k8s, managed, claim, &name, "RUN")?)?);
            cql.loaders = Some(cql.loaders.unwrap_or(1));
            let (user, password) = managed.login.clone().unzip();
            let set = super::k8s_server_cell::set_name(&name);
            let nodes = (0..managed.nodes).map(|k| format!("{}.{set}", statefulset::pod_name(&set, k))).collect();
            // The machine a `kill = "machine"` fault stops is known once the pods run: named
            // here by the pod it will run, so that the loaders' affinity off it shows.
            avoid = managed
                .kill
                .as_ref()
                .filter(|k| k.stops_machine())
                .map(|k| format!("NODE-OF-{}", statefulset::pod_name(&set, k.node - 1)));
            cql.target = Some(crate::workload::cql::Target { nodes, port: 9042, user, password, truststore: None });
        }
        let mut against = None;
        if let (Some(ServerSpec::Database(db)), Some(claim)) = (suite.server(cell.workload), &claim) {
            out.push_str(&database(super::k8s_server_cell::db_pod::database_objects(k8s, db, claim, &name, "RUN")?)?);
            let set = super::k8s_server_cell::set_name(&name);
            let host = format!("{}.{set}", statefulset::pod_name(&set, 0));
            let port = db.kind.engine().default_port();
            against = Some(crate::workload::served::Address { host, port, server: db.kind.key().into() });
        }
        let request = agent::Request {
            workload: spec,
            data_dir: manifest::DATA_DIR.into(),
            // As `runner::Place::run` asks the environment for a raw volume.
            raw: claim.as_ref().filter(|c| c.block).map(|_| RawTarget::Device(manifest::DEVICE_PATH.into())),
            read_only: false,
            scratch_dir: manifest::SCRATCH_DIR.into(),
            serve: None,
            against,
            barrier: false,
            slices: 0,
            collect: false,
        };
        let served = request.against.is_some()
            || matches!((suite.server(cell.workload), &request.workload), (Some(ServerSpec::Managed(_)), Spec::Cql(_)));
        let (claim, pod) = if served { (None, k8s.loader_pods(&name, avoid)) } else { (claim, k8s.pod.clone()) };
        out.push_str(&k8s.render(&pod, &request, claim.as_ref(), &name)?);
        out.push_str("---\n");
    }
    if out.is_empty() {
        anyhow::bail!("{}: no cell runs in a k8s environment (kind = \"k8s\")", suite.file);
    }
    Ok(out)
}

//! A database under test as Kubernetes runs one: a StatefulSet of `replicas` pods, each with its
//! data on a claim of its own (a `volumeClaimTemplate` built from the cell's `pvc` volume), a
//! headless Service that gives every pod a stable DNS name (`<set>-0.<service>`: the seed), and a
//! Secret holding what the pods read (the node's spec, and the load's password, which reaches the
//! pods' environment through `secretKeyRef` and never a pod spec). What runs in the pods is the
//! caller's: this file knows Kubernetes, not the database.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EnvVar, EnvVarSource, ExecAction, ObjectFieldSelector, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PodSpec, PodTemplateSpec, Probe, Secret, SecretKeySelector, SecretVolumeSource, Service,
    ServicePort, ServiceSpec, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::manifest::{Apart, PodSettings, labels};
use crate::volume::pvc::Claim;

/// The label that tells the database's pods from the loaders' (both carry the run's labels).
pub const ROLE_LABEL: &str = "isobench.dev/role";
pub const CONTAINER: &str = "database";
/// The Secret's keys.
pub const SPEC_KEY: &str = "db.json";
pub const PASSWORD_KEY: &str = "password";
/// The claim template's name: pod k's claim is `data-<set>-k`.
pub const CLAIM_TEMPLATE: &str = "data";

/// One database: what its pods run and where their data goes.
pub struct Database<'a> {
    /// The StatefulSet's, the Service's and the Secret's name.
    pub name: &'a str,
    /// The run's name and token, the labels every object of the run carries.
    pub run_name: &'a str,
    pub run_token: &'a str,
    pub image: &'a str,
    pub replicas: u32,
    /// How its pods keep apart from one another.
    pub spread: Apart,
    /// The container's command; it reads the spec at `spec_path`.
    pub command: Vec<String>,
    pub spec_json: String,
    pub spec_dir: &'a str,
    pub password: Option<&'a str>,
    /// Where the pods see their IP and the password.
    pub ip_var: &'a str,
    pub password_var: &'a str,
    pub claim: &'a Claim,
    pub data_dir: &'a str,
    pub ports: &'a [(&'a str, u16)],
    /// The command that says the pod is ready (its readiness probe).
    pub ready: Vec<String>,
    /// How long a pod may take to stop cleanly when deleted.
    pub stop_grace: i64,
}

pub struct DbObjects {
    pub secret: Secret,
    pub service: Service,
    pub set: StatefulSet,
}

impl Database<'_> {
    /// The pods' own labels: the run's, and that they are the database.
    pub fn pod_labels(&self) -> BTreeMap<String, String> {
        let mut l = labels(self.run_name, self.run_token);
        l.insert(ROLE_LABEL.into(), "database".into());
        l
    }

    pub fn selector(&self) -> BTreeMap<String, String> {
        selector(self.run_name)
    }

    pub fn objects(&self, pod: &PodSettings) -> DbObjects {
        let meta = || ObjectMeta {
            name: Some(self.name.to_string()),
            namespace: Some(pod.namespace.clone()),
            labels: Some(self.pod_labels()),
            ..Default::default()
        };
        let mut data = BTreeMap::from([(SPEC_KEY.to_string(), ByteString(self.spec_json.clone().into_bytes()))]);
        if let Some(password) = self.password {
            data.insert(PASSWORD_KEY.into(), ByteString(password.as_bytes().to_vec()));
        }
        let secret = Secret { metadata: meta(), data: Some(data), ..Default::default() };
        let service = Service {
            metadata: meta(),
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".into()),
                // The seed's name must resolve while it starts, before it is ready.
                publish_not_ready_addresses: Some(true),
                selector: Some(self.selector()),
                ports: Some(
                    self.ports
                        .iter()
                        .map(|(name, port)| ServicePort {
                            name: Some(name.to_string()),
                            port: i32::from(*port),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        let claim = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(CLAIM_TEMPLATE.into()),
                // The claims are made by the StatefulSet controller, with these labels: what a
                // teardown after a killed run finds them by.
                labels: Some(self.pod_labels()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec![self.claim.access_mode.clone()]),
                storage_class_name: Some(self.claim.storage_class.clone()),
                volume_mode: Some("Filesystem".into()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".to_string(), Quantity(self.claim.size.to_string()))])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let set = StatefulSet {
            metadata: meta(),
            spec: Some(StatefulSetSpec {
                replicas: Some(self.replicas as i32),
                service_name: Some(self.name.to_string()),
                // Together: each node's tokens are set from its place in the ring, not allocated,
                // so fresh nodes started together do not race for them, and every node but the
                // seed waits in its pod until the seed listens to its peers (in_pod.rs).
                pod_management_policy: Some("Parallel".into()),
                selector: LabelSelector { match_labels: Some(self.selector()), ..Default::default() },
                persistent_volume_claim_retention_policy: Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_deleted: Some("Delete".into()),
                    when_scaled: Some("Delete".into()),
                }),
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta { labels: Some(self.pod_labels()), ..Default::default() }),
                    spec: Some(self.pod_spec(pod)),
                },
                volume_claim_templates: Some(vec![claim]),
                ..Default::default()
            }),
            ..Default::default()
        };
        DbObjects { secret, service, set }
    }

    fn pod_spec(&self, pod: &PodSettings) -> PodSpec {
        let mut env = vec![EnvVar {
            name: self.ip_var.to_string(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: "status.podIP".into(), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        }];
        if self.password.is_some() {
            env.push(EnvVar {
                name: self.password_var.to_string(),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: self.name.to_string(),
                        key: PASSWORD_KEY.into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        PodSpec {
            runtime_class_name: pod.runtime_class.clone(),
            node_selector: (!pod.node_selector.is_empty()).then(|| pod.node_selector.iter().cloned().collect()),
            affinity: self.affinity(),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            termination_grace_period_seconds: Some(self.stop_grace),
            containers: vec![Container {
                name: CONTAINER.into(),
                image: Some(self.image.to_string()),
                image_pull_policy: pod.pull_policy.clone(),
                command: Some(self.command.clone()),
                env: Some(env),
                ports: Some(
                    self.ports
                        .iter()
                        .map(|(name, port)| ContainerPort {
                            name: Some(name.to_string()),
                            container_port: i32::from(*port),
                            ..Default::default()
                        })
                        .collect(),
                ),
                readiness_probe: Some(Probe {
                    exec: Some(ExecAction { command: Some(self.ready.clone()) }),
                    period_seconds: Some(2),
                    failure_threshold: Some(3),
                    ..Default::default()
                }),
                resources: super::manifest::resources(pod),
                volume_mounts: Some(vec![
                    VolumeMount {
                        name: "spec".into(),
                        mount_path: self.spec_dir.to_string(),
                        read_only: Some(true),
                        ..Default::default()
                    },
                    VolumeMount {
                        name: CLAIM_TEMPLATE.into(),
                        mount_path: self.data_dir.to_string(),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }],
            volumes: Some(vec![Volume {
                name: "spec".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(self.name.to_string()),
                    items: Some(vec![k8s_openapi::api::core::v1::KeyToPath {
                        key: SPEC_KEY.into(),
                        path: SPEC_KEY.into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    fn affinity(&self) -> Option<Affinity> {
        super::manifest::apart_from(self.spread, &self.selector())
    }
}

/// The selector of a run's database pods (the StatefulSet's and the Service's).
pub fn selector(run_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (super::manifest::NAME_LABEL.to_string(), run_name.to_string()),
        (ROLE_LABEL.into(), "database".into()),
    ])
}

/// Pod k's name and its claim's.
pub fn pod_name(set: &str, k: usize) -> String {
    format!("{set}-{k}")
}

pub fn claim_name(set: &str, k: usize) -> String {
    format!("{CLAIM_TEMPLATE}-{}", pod_name(set, k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database(spread: Apart, password: Option<&str>) -> DbObjects {
        let claim =
            Claim { storage_class: "fast".into(), size: 1 << 30, access_mode: "ReadWriteOnce".into(), block: false };
        let pod = PodSettings {
            namespace: "bench".into(),
            runtime_class: Some("gvisor".into()),
            cpu: Some("2".into()),
            memory: Some(4 << 30),
            ..Default::default()
        };
        Database {
            name: "isobench-1-2-db",
            run_name: "isobench-1-2",
            run_token: "1-2",
            image: "isobench-cassandra:5.0.9",
            replicas: 3,
            spread,
            command: vec!["isobench".into(), "k8s".into(), "db".into(), "run".into()],
            spec_json: "{}".into(),
            spec_dir: "/run/isobench",
            password,
            ip_var: "POD_IP",
            password_var: "ISOBENCH_DB_PASSWORD",
            claim: &claim,
            data_dir: "/data",
            ports: &[("cql", 9042), ("storage", 7000)],
            ready: vec!["isobench".into(), "k8s".into(), "db".into(), "ready".into()],
            stop_grace: 60,
        }
        .objects(&pod)
    }

    #[test]
    fn a_database_is_a_statefulset_with_claims_a_headless_service_and_a_secret_all_labelled() {
        let o = database(Apart::Required, Some("s3cret"));
        let spec = o.set.spec.as_ref().unwrap();
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(spec.service_name.as_deref(), Some("isobench-1-2-db"));
        assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
        let claims = spec.volume_claim_templates.as_ref().unwrap();
        let claim = claims[0].spec.as_ref().unwrap();
        assert_eq!(claim.storage_class_name.as_deref(), Some("fast"));
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.runtime_class_name.as_deref(), Some("gvisor"));
        let anti = pod.affinity.as_ref().unwrap().pod_anti_affinity.as_ref().unwrap();
        assert_eq!(anti.required_during_scheduling_ignored_during_execution.as_ref().unwrap().len(), 1);
        assert_eq!(o.service.spec.as_ref().unwrap().cluster_ip.as_deref(), Some("None"));
        for labels in
            [&o.secret.metadata.labels, &o.service.metadata.labels, &o.set.metadata.labels, &claims[0].metadata.labels]
        {
            assert_eq!(labels.as_ref().unwrap()[super::super::manifest::RUN_LABEL], "1-2");
        }
        // The password is in the Secret, and the pod spec names only the Secret.
        let pod_json = serde_json::to_string(&o.set).unwrap();
        assert!(!pod_json.contains("s3cret"), "{pod_json}");
        assert!(pod_json.contains("secretKeyRef"), "{pod_json}");
        assert_eq!(o.secret.data.as_ref().unwrap()[PASSWORD_KEY].0, b"s3cret");
        assert_eq!(claim_name("isobench-1-2-db", 2), "data-isobench-1-2-db-2");
    }

    #[test]
    fn spread_preferred_is_a_weighted_term_and_none_is_no_affinity() {
        let o = database(Apart::Preferred, None);
        let pod = o.set.spec.unwrap().template.spec.unwrap();
        let anti = pod.affinity.unwrap().pod_anti_affinity.unwrap();
        assert!(anti.required_during_scheduling_ignored_during_execution.is_none());
        assert_eq!(anti.preferred_during_scheduling_ignored_during_execution.unwrap()[0].weight, 100);
        assert!(pod.containers[0].env.as_ref().unwrap().iter().all(|e| e.name != "ISOBENCH_DB_PASSWORD"));
        let o = database(Apart::None, None);
        assert!(o.set.spec.unwrap().template.spec.unwrap().affinity.is_none());
    }
}

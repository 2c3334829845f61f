//! The objects one run applies, as the API's typed structs: a Secret holding the agent's request
//! (it may carry a database password, which must not sit in a pod spec), the claim of a `pvc`
//! volume, and the Job whose pod runs `isobench agent`. `isobench k8s render` prints the same.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, EmptyDirVolumeSource, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, PodAffinityTerm,
    PodAntiAffinity, PodSpec, PodTemplateSpec, ResourceRequirements, Secret, SecretVolumeSource, Volume, VolumeDevice,
    VolumeMount, VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::volume::pvc::Claim;

/// Every object isobench makes carries this, with the run's token as its value: what
/// `isobench cleanup` deletes, and what a user selects to see a run's pods.
pub const RUN_LABEL: &str = "isobench.dev/run";
/// The one run of a cell an object belongs to (what the run deletes when it ends).
pub const NAME_LABEL: &str = "isobench.dev/name";

pub const AGENT_CONTAINER: &str = "agent";
/// Where the image has isobench (the Dockerfile and `scripts/k8s-image.sh` put it there).
pub const AGENT_IN_IMAGE: &str = "/usr/local/bin/isobench";
pub const REQUEST_DIR: &str = "/run/isobench";
pub const DATA_DIR: &str = "/data";
pub const SCRATCH_DIR: &str = "/scratch";
/// Where a `volume_mode = "Block"` claim appears in the pod.
pub const DEVICE_PATH: &str = "/dev/isobench-data";

/// How the suite's k8s environment shapes each pod.
#[derive(Clone, Debug, Default)]
pub struct PodSettings {
    pub namespace: String,
    pub runtime_class: Option<String>,
    pub image: String,
    pub pull_policy: Option<String>,
    pub node_selector: Vec<(String, String)>,
    pub cpu: Option<String>,
    pub memory: Option<u64>,
    pub host_network: bool,
    /// Kept off the machines that run the pods this selector matches (the loaders off the
    /// database's), as strictly as `Apart` says.
    pub apart_from: Option<(Apart, BTreeMap<String, String>)>,
    /// A machine the pod must not run on.
    pub avoid_node: Option<String>,
}

/// How strictly pods keep off the machines of others (a pod anti-affinity on the machine's
/// hostname): `spread` keeps a database's pods apart from one another, `loaders_apart` the
/// loader pods from the database's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Apart {
    /// Apart, or the pod is not scheduled.
    Required,
    /// Apart where there are machines enough.
    #[default]
    Preferred,
    None,
}

impl Apart {
    pub const CHOICES: &[&str] = &["required", "preferred", "none"];

    pub fn parse(word: &str) -> Option<Apart> {
        match word {
            "required" => Some(Apart::Required),
            "preferred" => Some(Apart::Preferred),
            "none" => Some(Apart::None),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Apart::Required => "required",
            Apart::Preferred => "preferred",
            Apart::None => "none",
        }
    }
}

/// A pod's affinity that keeps it off the machines running the pods `selector` matches.
pub fn apart_from(apart: Apart, selector: &BTreeMap<String, String>) -> Option<Affinity> {
    let term = || PodAffinityTerm {
        label_selector: Some(LabelSelector { match_labels: Some(selector.clone()), ..Default::default() }),
        topology_key: "kubernetes.io/hostname".into(),
        ..Default::default()
    };
    let anti = match apart {
        Apart::None => return None,
        Apart::Required => PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term()]),
            ..Default::default()
        },
        Apart::Preferred => PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
                weight: 100,
                pod_affinity_term: term(),
            }]),
            ..Default::default()
        },
    };
    Some(Affinity { pod_anti_affinity: Some(anti), ..Default::default() })
}

/// The pod's affinity: apart from others' machines, and off the one it must avoid.
fn affinity(pod: &PodSettings) -> Option<Affinity> {
    let mut affinity = pod.apart_from.as_ref().and_then(|(apart, selector)| apart_from(*apart, selector));
    if let Some(node) = &pod.avoid_node {
        let off = NodeSelectorRequirement {
            key: "kubernetes.io/hostname".into(),
            operator: "NotIn".into(),
            values: Some(vec![node.clone()]),
        };
        let required = NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm { match_expressions: Some(vec![off]), ..Default::default() }],
        };
        affinity.get_or_insert_with(Affinity::default).node_affinity = Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(required),
            ..Default::default()
        });
    }
    affinity
}

/// What one run applies.
pub struct Objects {
    pub secret: Secret,
    pub claim: Option<PersistentVolumeClaim>,
    pub job: Job,
}

/// One run's objects. `loaders`: an Indexed Job of that many pods (each its completion index's
/// slice of the load) that never mounts the claim, which a database load does not touch.
pub fn objects(
    pod: &PodSettings,
    name: &str,
    run_token: &str,
    request_json: String,
    claim: Option<&Claim>,
    loaders: Option<u32>,
    deadline: Duration,
) -> Objects {
    let meta = || ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(pod.namespace.clone()),
        labels: Some(labels(name, run_token)),
        ..Default::default()
    };
    let secret = Secret {
        metadata: meta(),
        data: Some(BTreeMap::from([("request.json".to_string(), ByteString(request_json.into_bytes()))])),
        ..Default::default()
    };
    let claim = claim.filter(|_| loaders.is_none());
    let data = claim.map(|c| if c.block { DataMount::Device } else { DataMount::Filesystem });
    let claim = claim.map(|c| PersistentVolumeClaim {
        metadata: meta(),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![c.access_mode.clone()]),
            storage_class_name: Some(c.storage_class.clone()),
            volume_mode: Some(if c.block { "Block" } else { "Filesystem" }.into()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity(c.size.to_string()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let job = Job {
        metadata: meta(),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            completions: loaders.map(|n| n as i32),
            parallelism: loaders.map(|n| n as i32),
            completion_mode: loaders.map(|_| "Indexed".into()),
            active_deadline_seconds: Some(deadline.as_secs().max(1) as i64),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels(name, run_token)), ..Default::default() }),
                spec: Some(pod_spec(pod, name, data)),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    Objects { secret, claim, job }
}

/// How the data volume enters the container: a filesystem at DATA_DIR or a device node.
#[derive(Clone, Copy)]
pub enum DataMount {
    Filesystem,
    Device,
}

pub fn labels(name: &str, run_token: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/managed-by".to_string(), "isobench".to_string()),
        (RUN_LABEL.into(), run_token.to_string()),
        (NAME_LABEL.into(), name.to_string()),
    ])
}

/// The pod: the agent reads its request from the Secret, writes scratch files to an emptyDir,
/// and finds the volume under test at DATA_DIR (the claim, or an emptyDir when there is none).
pub fn pod_spec(pod: &PodSettings, name: &str, claim: Option<DataMount>) -> PodSpec {
    let mut mounts = vec![
        VolumeMount {
            name: "request".into(),
            mount_path: REQUEST_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        },
        VolumeMount { name: "scratch".into(), mount_path: SCRATCH_DIR.into(), ..Default::default() },
    ];
    let mut devices = Vec::new();
    match claim {
        Some(DataMount::Device) => devices.push(VolumeDevice { name: "data".into(), device_path: DEVICE_PATH.into() }),
        _ => mounts.push(VolumeMount { name: "data".into(), mount_path: DATA_DIR.into(), ..Default::default() }),
    }
    let empty = || Some(EmptyDirVolumeSource::default());
    let data = match claim {
        Some(_) => Volume {
            name: "data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: name.to_string(),
                ..Default::default()
            }),
            ..Default::default()
        },
        None => Volume { name: "data".into(), empty_dir: empty(), ..Default::default() },
    };
    let volumes = vec![
        Volume {
            name: "request".into(),
            secret: Some(SecretVolumeSource { secret_name: Some(name.to_string()), ..Default::default() }),
            ..Default::default()
        },
        Volume { name: "scratch".into(), empty_dir: empty(), ..Default::default() },
        data,
    ];
    PodSpec {
        restart_policy: Some("Never".into()),
        runtime_class_name: pod.runtime_class.clone(),
        node_selector: (!pod.node_selector.is_empty()).then(|| pod.node_selector.iter().cloned().collect()),
        affinity: affinity(pod),
        host_network: pod.host_network.then_some(true),
        dns_policy: pod.host_network.then(|| "ClusterFirstWithHostNet".into()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        termination_grace_period_seconds: Some(5),
        containers: vec![Container {
            name: AGENT_CONTAINER.into(),
            image: Some(pod.image.clone()),
            image_pull_policy: pod.pull_policy.clone(),
            command: Some(vec![
                AGENT_IN_IMAGE.into(),
                "agent".into(),
                "--request".into(),
                format!("{REQUEST_DIR}/request.json"),
            ]),
            volume_mounts: Some(mounts),
            volume_devices: (!devices.is_empty()).then_some(devices),
            resources: resources(pod),
            ..Default::default()
        }],
        volumes: Some(volumes),
        ..Default::default()
    }
}

/// The suite's cpu and memory as requests equal to limits: the Guaranteed class, so that a pod
/// is not squeezed mid-run.
pub fn resources(pod: &PodSettings) -> Option<ResourceRequirements> {
    let mut limits = BTreeMap::new();
    if let Some(cpu) = &pod.cpu {
        limits.insert("cpu".to_string(), Quantity(cpu.clone()));
    }
    if let Some(memory) = pod.memory {
        limits.insert("memory".to_string(), Quantity(memory.to_string()));
    }
    (!limits.is_empty()).then(|| ResourceRequirements {
        requests: Some(limits.clone()),
        limits: Some(limits),
        ..Default::default()
    })
}

/// A pod of the Job's template, for the API server's dry run (admission: the RuntimeClass, the
/// node selector, quotas) before the first run.
pub fn dry_run_pod(pod: &PodSettings, name: &str) -> k8s_openapi::api::core::v1::Pod {
    k8s_openapi::api::core::v1::Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(pod.namespace.clone()),
            ..Default::default()
        },
        spec: Some(pod_spec(pod, name, None)),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> PodSettings {
        PodSettings {
            namespace: "bench".into(),
            runtime_class: Some("gvisor".into()),
            image: "isobench:1".into(),
            cpu: Some("1".into()),
            memory: Some(1 << 30),
            node_selector: vec![("disk".into(), "nvme".into())],
            ..Default::default()
        }
    }

    #[test]
    fn a_run_is_a_job_with_its_secret_and_claim_all_labelled() {
        let claim =
            Claim { storage_class: "fast".into(), size: 1 << 30, access_mode: "ReadWriteOnce".into(), block: false };
        let o = objects(&settings(), "isobench-1-2", "1-2", "{}".into(), Some(&claim), None, Duration::from_secs(90));
        let job = o.job.spec.as_ref().unwrap();
        let pod = job.template.spec.as_ref().unwrap();
        assert_eq!(pod.runtime_class_name.as_deref(), Some("gvisor"));
        assert_eq!(job.backoff_limit, Some(0));
        assert_eq!(job.completion_mode, None);
        let volumes = pod.volumes.as_ref().unwrap();
        let data = volumes.iter().find(|v| v.name == "data").unwrap();
        assert_eq!(data.persistent_volume_claim.as_ref().unwrap().claim_name, "isobench-1-2");
        let pvc = o.claim.unwrap();
        assert_eq!(pvc.spec.as_ref().unwrap().storage_class_name.as_deref(), Some("fast"));
        for labels in [&o.secret.metadata.labels, &pvc.metadata.labels, &o.job.metadata.labels] {
            assert_eq!(labels.as_ref().unwrap()[RUN_LABEL], "1-2");
        }
        let limits = pod.containers[0].resources.as_ref().unwrap();
        assert_eq!(limits.requests, limits.limits, "requests equal limits: the Guaranteed class");
    }

    #[test]
    fn loaders_keep_off_the_databases_machines_as_strictly_as_asked() {
        let selector = BTreeMap::from([(NAME_LABEL.to_string(), "run-1".to_string())]);
        let affinity = |apart| {
            let pod = PodSettings { apart_from: Some((apart, selector.clone())), ..settings() };
            let o = objects(&pod, "n", "t", "{}".into(), None, Some(2), Duration::from_secs(90));
            o.job.spec.unwrap().template.spec.unwrap().affinity.and_then(|a| a.pod_anti_affinity)
        };
        let required = affinity(Apart::Required).unwrap().required_during_scheduling_ignored_during_execution.unwrap();
        assert_eq!(required[0].topology_key, "kubernetes.io/hostname");
        assert_eq!(required[0].label_selector.as_ref().unwrap().match_labels.as_ref(), Some(&selector));
        let preferred = affinity(Apart::Preferred).unwrap();
        assert!(preferred.required_during_scheduling_ignored_during_execution.is_none());
        assert_eq!(preferred.preferred_during_scheduling_ignored_during_execution.unwrap()[0].weight, 100);
        assert!(affinity(Apart::None).is_none());
    }

    #[test]
    fn loaders_are_an_indexed_job_without_the_claim() {
        let claim =
            Claim { storage_class: "fast".into(), size: 1 << 30, access_mode: "ReadWriteOnce".into(), block: true };
        let o = objects(&settings(), "n", "t", "{}".into(), Some(&claim), Some(4), Duration::from_secs(90));
        let job = o.job.spec.as_ref().unwrap();
        assert_eq!((job.completions, job.parallelism), (Some(4), Some(4)));
        assert_eq!(job.completion_mode.as_deref(), Some("Indexed"));
        assert!(o.claim.is_none());
        let pod = job.template.spec.as_ref().unwrap();
        assert!(pod.volumes.as_ref().unwrap().iter().any(|v| v.name == "data" && v.empty_dir.is_some()));
    }

    #[test]
    fn a_block_claim_is_a_device_not_a_mount() {
        let claim =
            Claim { storage_class: "fast".into(), size: 1 << 30, access_mode: "ReadWriteOnce".into(), block: true };
        let o = objects(&settings(), "n", "t", "{}".into(), Some(&claim), None, Duration::from_secs(90));
        let c = &o.job.spec.unwrap().template.spec.unwrap().containers[0];
        assert_eq!(c.volume_devices.as_ref().unwrap()[0].device_path, DEVICE_PATH);
        assert!(!c.volume_mounts.as_ref().unwrap().iter().any(|m| m.mount_path == DATA_DIR));
    }
}

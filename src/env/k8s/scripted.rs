//! A cluster for unit tests: it answers `ClusterApi` from a script (pods, logs, volumes, the
//! kubelets' samples), changes as its timeline says, and keeps a journal of what was asked of it
//! and when. A machine is down while a file of its name is in the script's machine folder, as a
//! machine command of the env's can make it: the node is then NotReady, and its pods are not
//! Ready until their containers' restart after it is back.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use k8s_openapi::api::core::v1::Pod;

use super::cluster_api::ClusterApi;
use super::kubelet::CpuSample;

/// A change of the script's state.
pub(crate) type Change = Box<dyn FnOnce(&mut State) + Send>;
/// What a deleted pod becomes at once, and the changes due that long after the deletion.
type OnKill = Box<dyn FnMut(&mut State, &str) -> Vec<(Duration, Change)> + Send>;

/// What the scripted cluster holds; tests fill it and read its journal.
#[derive(Default)]
pub(crate) struct State {
    pub pods: BTreeMap<String, Pod>,
    pub logs: BTreeMap<String, String>,
    pub claims: BTreeMap<String, String>,
    /// A PersistentVolume's class, source and pinned node.
    pub volumes: BTreeMap<String, (String, String, Option<String>)>,
    pub node_runtimes: BTreeMap<String, String>,
    /// The kubelet's latest samples on each node, by pod uid.
    pub cpu: BTreeMap<String, BTreeMap<String, CpuSample>>,
    /// Each call, how long after the script began.
    pub journal: Vec<(Duration, String)>,
    /// Each machine seen down: None while it is, then when it was first seen back.
    back_since: BTreeMap<String, Option<Duration>>,
}

pub(crate) struct Scripted {
    began: Instant,
    state: Mutex<State>,
    timeline: Mutex<Vec<(Duration, Change)>>,
    on_kill: Mutex<Option<OnKill>>,
    machines: Option<(PathBuf, Duration)>,
}

impl Scripted {
    pub fn new(state: State) -> Scripted {
        Scripted {
            began: Instant::now(),
            state: Mutex::new(state),
            timeline: Mutex::default(),
            on_kill: Mutex::default(),
            machines: None,
        }
    }

    /// Machines are down while a file of their name is in `dir`; their pods' containers take
    /// `restart` to be Ready again once it is back.
    pub fn with_machines(mut self, dir: PathBuf, restart: Duration) -> Scripted {
        self.machines = Some((dir, restart));
        self
    }

    /// `change` happens `after` the script began (seen by the first call after then).
    pub fn at(&self, after: Duration, change: impl FnOnce(&mut State) + Send + 'static) {
        self.timeline.lock().unwrap().push((after, Box::new(change)));
    }

    /// What a deleted pod becomes: `react(state, pod)` changes the state at once, and gives the
    /// changes due that long after the deletion.
    pub fn on_kill(&self, react: impl FnMut(&mut State, &str) -> Vec<(Duration, Change)> + Send + 'static) {
        *self.on_kill.lock().unwrap() = Some(Box::new(react));
    }

    pub fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    pub fn elapsed(&self) -> Duration {
        self.began.elapsed()
    }

    /// The journal's calls that start with `call`, with when.
    pub fn calls(&self, call: &str) -> Vec<Duration> {
        self.state().journal.iter().filter(|(_, c)| c.starts_with(call)).map(|(at, _)| *at).collect()
    }

    /// The state after every change due, the call written in the journal, and which nodes are
    /// down and which pods' machines are (or were, their containers restarting).
    fn answer<T>(&self, call: String, read: impl FnOnce(&State, &Machines) -> T) -> T {
        let now = self.began.elapsed();
        let mut state = self.state.lock().unwrap();
        let due: Vec<Change> = {
            let mut timeline = self.timeline.lock().unwrap();
            let (due, later) = timeline.drain(..).partition(|(at, _)| *at <= now);
            *timeline = later;
            due.into_iter().map(|(_, change)| change).collect()
        };
        for change in due {
            change(&mut state);
        }
        state.journal.push((now, call));
        let mut machines = Machines::default();
        if let Some((dir, restart)) = &self.machines {
            for entry in std::fs::read_dir(dir).unwrap() {
                machines.down.push(entry.unwrap().file_name().to_string_lossy().into_owned());
            }
            for (node, back) in state.back_since.iter_mut() {
                if !machines.down.contains(node) {
                    back.get_or_insert(now);
                }
            }
            for node in &machines.down {
                state.back_since.insert(node.clone(), None);
            }
            let restarting = state.back_since.iter().filter(|(_, back)| back.is_none_or(|at| now < at + *restart));
            machines.restarting = restarting.map(|(node, _)| node.clone()).collect();
        }
        read(&state, &machines)
    }

    /// A pod as the API server shows it: not Ready while its machine is down or restarting it.
    fn shown(pod: &Pod, machines: &Machines) -> Pod {
        let mut pod = pod.clone();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        if machines.restarting.contains(&node) {
            for c in pod.status.iter_mut().flat_map(|s| s.conditions.iter_mut().flatten()) {
                if c.type_ == "Ready" {
                    c.status = "False".into();
                }
            }
        }
        pod
    }
}

/// The machines down now, and those whose pods' containers are not back yet.
#[derive(Default)]
struct Machines {
    down: Vec<String>,
    restarting: Vec<String>,
}

/// A running pod of `uid` on `node`, Ready or not; `labels` and `extra` (JSON merged into the
/// pod: its spec's volumes, its status's containers) as a test needs.
pub(crate) fn pod(name: &str, uid: &str, node: &str, ready: bool, extra: serde_json::Value) -> Pod {
    let mut pod = serde_json::json!({
        "metadata": {"name": name, "uid": uid},
        "spec": {"nodeName": node, "containers": [{"name": "agent"}]},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    });
    merge(&mut pod, extra);
    serde_json::from_value(pod).unwrap()
}

pub(crate) fn merge(into: &mut serde_json::Value, from: serde_json::Value) {
    match (into, from) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn labelled(pod: &Pod, selector: &str) -> bool {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    selector.split(',').all(|pair| pair.split_once('=').is_some_and(|(k, v)| labels.get(k).is_some_and(|l| l == v)))
}

impl ClusterApi for Scripted {
    async fn pod(&self, name: &str) -> Result<Option<Pod>> {
        Ok(self.answer(format!("pod {name}"), |s, m| s.pods.get(name).map(|p| Scripted::shown(p, m))))
    }

    async fn pods_with(&self, selector: &str) -> Result<Vec<Pod>> {
        Ok(self.answer(format!("pods_with {selector}"), |s, m| {
            s.pods.values().filter(|p| labelled(p, selector)).map(|p| Scripted::shown(p, m)).collect()
        }))
    }

    async fn job_pods(&self, job: &str) -> Result<Vec<Pod>> {
        self.pods_with(&format!("job-name={job}")).await
    }

    async fn log(&self, pod: &str) -> Result<String> {
        self.answer(format!("log {pod}"), |s, _| s.logs.get(pod).cloned().ok_or_else(|| anyhow!("no pod {pod}")))
    }

    async fn kill_pod(&self, pod: &str) -> Result<()> {
        let when = self.answer(format!("kill_pod {pod}"), |_, _| self.began.elapsed());
        let later = self.on_kill.lock().unwrap().as_mut().map(|react| react(&mut self.state(), pod));
        let later = later.into_iter().flatten().map(|(after, change)| (when + after, change));
        self.timeline.lock().unwrap().extend(later);
        Ok(())
    }

    async fn node_ready(&self, node: &str) -> Result<bool> {
        Ok(self.answer(format!("node_ready {node}"), |_, m| !m.down.iter().any(|n| n == node)))
    }

    async fn bound_volume(&self, claim: &str) -> Result<Option<String>> {
        Ok(self.answer(format!("bound_volume {claim}"), |s, _| s.claims.get(claim).cloned()))
    }

    async fn volume_source(&self, pv: &str) -> Result<(String, String)> {
        Ok(self.answer(format!("volume_source {pv}"), |s, _| {
            s.volumes.get(pv).map(|(class, source, _)| (class.clone(), source.clone())).unwrap_or_default()
        }))
    }

    async fn volume_node(&self, pv: &str) -> Result<Option<String>> {
        Ok(self.answer(format!("volume_node {pv}"), |s, _| s.volumes.get(pv).and_then(|v| v.2.clone())))
    }

    async fn runtime_facts(&self, node: &str, _class: Option<&str>, setup: &mut BTreeMap<String, String>) {
        if let Some(runtime) = self.answer(format!("runtime_facts {node}"), |s, _| s.node_runtimes.get(node).cloned()) {
            setup.insert("k8s.node_runtime".into(), runtime);
        }
    }

    async fn reach_kubelet(&self, node: &str) -> Result<String> {
        Ok(self.answer(format!("reach_kubelet {node}"), |_, _| format!("{node}'s scripted kubelet")))
    }

    async fn pods_cpu(&self, node: &str) -> Result<BTreeMap<String, CpuSample>> {
        Ok(self.answer(format!("pods_cpu {node}"), |s, _| s.cpu.get(node).cloned().unwrap_or_default()))
    }
}

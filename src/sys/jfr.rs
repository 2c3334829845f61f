//! The JVM's own samples of its Java threads: its flight recorder's `jdk.ExecutionSample`, the
//! method on top of a thread's stack every 10 ms and whether the interpreter or compiled code ran
//! it. To perf the bytecode interpreter is one piece of code (`Interpreter` in the JIT's map), and
//! under gVisor every Java thread is one of the sentry's; these samples name the methods the
//! interpreter was running and the Java threads that ran them.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::{Check, Wait};

/// The recording's settings: the execution samples alone, every 10 ms (the JDK's `profile`
/// settings' period), so that the recorder records nothing else.
const SETTINGS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="isobench" description="The execution samples alone">
  <event name="jdk.ExecutionSample">
    <setting name="enabled">true</setting>
    <setting name="period">10 ms</setting>
  </event>
</configuration>
"#;

/// The recording a JVM whose recorder [`start`] started writes in `dir` as it exits.
pub fn recording_in(dir: &Path) -> PathBuf {
    dir.join("isobench.jfr")
}

/// Starts the recorder of the JVM `pid` (in this process's pid namespace and /tmp), its settings
/// and the recording in `dir`, through the JVM's attach mechanism as jcmd does, without a JVM of
/// its own. The recorder's start loads its classes, most of a CPU-second on this machine's host
/// and more under gVisor: asked for once the server is up and before its load, it stays out of
/// the server's start, which a flag at the JVM's start would not.
pub fn start(pid: i32, dir: &Path) -> Result<()> {
    let settings = dir.join("isobench.jfc");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(&settings, SETTINGS).with_context(|| format!("writing {}", settings.display()))?;
    let command = format!(
        "JFR.start name=isobench settings={} filename={} dumponexit=true",
        settings.display(),
        recording_in(dir).display()
    );
    let reply = attach_command(pid, &command)?;
    match reply.strip_prefix("0\n") {
        Some(_) => Ok(()),
        None => bail!("the JVM did not start its recorder: {}", reply.trim()),
    }
}

/// HotSpot's attach protocol on Linux: the JVM listens on /tmp/.java_pidPID once a SIGQUIT finds
/// /tmp/.attach_pidPID (without that file, a SIGQUIT only prints its threads); a request is the
/// protocol's version, the command and three arguments, each ended by a NUL; the answer is a
/// result code on a line, then the command's output.
fn attach_command(pid: i32, command: &str) -> Result<String> {
    let socket = PathBuf::from(format!("/tmp/.java_pid{pid}"));
    if !socket.exists() {
        let trigger = PathBuf::from(format!("/tmp/.attach_pid{pid}"));
        std::fs::write(&trigger, b"").with_context(|| format!("writing {}", trigger.display()))?;
        let listening =
            nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGQUIT).context("signalling the JVM").and_then(|_| {
                Wait::new("the JVM's attach listener", ATTACH_WITHIN).until(|| match socket.exists() {
                    true => Ok(Check::Done(())),
                    false => Ok(Check::NotYet(String::new())),
                })
            });
        let _ = std::fs::remove_file(&trigger);
        listening?;
    }
    let mut stream = UnixStream::connect(&socket).with_context(|| format!("connecting to {}", socket.display()))?;
    stream.set_read_timeout(Some(ANSWER_WITHIN))?;
    stream.write_all(format!("1\0jcmd\0{command}\0\0\0").as_bytes())?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).context("reading the JVM's answer")?;
    Ok(reply)
}

/// How long a JVM may take to open its attach listener, and to answer a command.
const ATTACH_WITHIN: Duration = Duration::from_secs(10);
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// How the methods are found, for a run's setup.
pub const NAMED_BY: &str = "the interpreter's share split by the Java methods and threads the JVM's own sampler found it running (its flight recorder's jdk.ExecutionSample every 10 ms, interpreted frames of the measured phase)";

/// One execution sample.
#[derive(Debug, Clone, PartialEq)]
pub struct JavaSample {
    /// Seconds since the Unix epoch, by the JVM's clock.
    pub at: f64,
    pub thread: String,
    /// `package.Class.method`.
    pub method: String,
    pub interpreted: bool,
}

/// A recording's execution samples, read with the JDK's own reader (`jfr print --json`, run as
/// the `java` on the PATH runs it: a JRE has the module, not always the launcher).
pub fn read(recording: &[u8]) -> Result<Vec<JavaSample>> {
    let file = std::env::temp_dir().join(format!("isobench-{}-{}.jfr", std::process::id(), recording.len()));
    std::fs::write(&file, recording).with_context(|| format!("writing {}", file.display()))?;
    let printed = Command::new("java")
        .args(["-m", "jdk.jfr/jdk.jfr.internal.tool.Main", "print", "--json", "--stack-depth", "1"])
        .args(["--events", "jdk.ExecutionSample"])
        .arg(&file)
        .stdin(Stdio::null())
        .output();
    let _ = std::fs::remove_file(&file);
    let printed = printed.context("running java's flight recording reader (jdk.jfr)")?;
    if !printed.status.success() {
        bail!("jfr print failed ({}): {}", printed.status, String::from_utf8_lossy(&printed.stderr).trim());
    }
    parse(&String::from_utf8_lossy(&printed.stdout))
}

/// `jfr print --json`'s execution samples; a sample without a frame (a stack the recorder could
/// not walk) is passed over.
pub fn parse(json: &str) -> Result<Vec<JavaSample>> {
    let doc: serde_json::Value = serde_json::from_str(json).context("reading jfr print's JSON")?;
    let Some(events) = doc["recording"]["events"].as_array() else {
        bail!("jfr print's JSON has no recording.events");
    };
    let samples = events
        .iter()
        .filter(|e| e["type"] == "jdk.ExecutionSample")
        .filter_map(|e| {
            let values = &e["values"];
            let frame = values["stackTrace"]["frames"].as_array()?.first()?;
            let class = frame["method"]["type"]["name"].as_str()?.replace('/', ".");
            let method = frame["method"]["name"].as_str()?;
            Some(JavaSample {
                at: unix_seconds(values["startTime"].as_str()?)?,
                thread: values["sampledThread"]["javaName"].as_str().unwrap_or("?").to_string(),
                method: format!("{class}.{method}"),
                interpreted: frame["type"] == "Interpreted",
            })
        })
        .collect();
    Ok(samples)
}

fn unix_seconds(time: &str) -> Option<f64> {
    let at: jiff::Timestamp = time.parse().ok()?;
    Some(at.as_nanosecond() as f64 / 1e9)
}

/// The samples within `window` (Unix seconds; all without one).
pub fn within(samples: &[JavaSample], window: Option<(f64, f64)>) -> impl Iterator<Item = &JavaSample> {
    samples.iter().filter(move |s| window.is_none_or(|(from, to)| (from..=to).contains(&s.at)))
}

/// The interpreted ones among `samples`, counted by thread and method.
pub fn interpreted<'a>(samples: impl Iterator<Item = &'a JavaSample>) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for s in samples.filter(|s| s.interpreted) {
        *counts.entry((s.thread.clone(), s.method.clone())).or_default() += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_read_with_their_thread_method_and_frame_type() {
        let json = r#"{"recording": {"events": [
          {"type": "jdk.ExecutionSample", "values": {"startTime": "2026-12-04T22:00:01.500+01:00",
            "sampledThread": {"osName": "ReadStage-1", "javaName": "ReadStage-1"}, "state": "STATE_RUNNABLE",
            "stackTrace": {"truncated": true, "frames": [{"method": {"type": {"name": "org.apache.cassandra.db.ReadCommand"},
              "name": "executeLocally", "descriptor": "()V"}, "lineNumber": 3, "bytecodeIndex": 1, "type": "Interpreted"}]}}},
          {"type": "jdk.ExecutionSample", "values": {"startTime": "2026-12-04T21:00:02Z",
            "sampledThread": {"javaName": "main"},
            "stackTrace": {"frames": [{"method": {"type": {"name": "java/lang/String"}, "name": "hashCode"}, "type": "JIT compiled"}]}}},
          {"type": "jdk.ExecutionSample", "values": {"startTime": "2026-12-04T21:00:03Z", "stackTrace": {"frames": []}}}
        ]}}"#;
        let samples = parse(json).unwrap();
        assert_eq!(samples.len(), 2, "the sample without a frame is passed over");
        assert_eq!(samples[0].method, "org.apache.cassandra.db.ReadCommand.executeLocally");
        assert_eq!((samples[0].thread.as_str(), samples[0].interpreted), ("ReadStage-1", true));
        assert_eq!((samples[1].method.as_str(), samples[1].interpreted), ("java.lang.String.hashCode", false));
        // Both at 21:00 UTC, the first half a second earlier.
        assert!((samples[0].at - samples[1].at + 0.5).abs() < 1e-6, "{samples:?}");
        assert_eq!(within(&samples, None).count(), 2);
        assert_eq!(interpreted(within(&samples, None)).len(), 1);
        let before = Some((samples[0].at - 10.0, samples[0].at - 1.0));
        assert_eq!(within(&samples, before).count(), 0);
        let around = Some((samples[0].at - 0.1, samples[0].at + 0.1));
        assert_eq!(within(&samples, around).count(), 1);
    }

    #[test]
    fn json_without_events_is_an_error() {
        assert!(parse("{}").is_err());
        assert!(parse("not json").is_err());
    }
}

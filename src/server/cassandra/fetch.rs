//! Cassandra from Maven Central: `cassandra-all` and its runtime dependencies fetched with
//! `mvn dependency:copy-dependencies` into a cache, once per version.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::sys;

/// The Cassandra isobench fetches unless told otherwise (`--version`, ISOBENCH_CASSANDRA_VERSION).
pub const DEFAULT_VERSION: &str = "5.0.9";

/// Where fetched distributions live: $ISOBENCH_CACHE, else $XDG_CACHE_HOME/isobench, else
/// ~/.cache/isobench.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("ISOBENCH_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("isobench");
    }
    PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache/isobench")
}

pub fn default_version() -> String {
    std::env::var("ISOBENCH_CASSANDRA_VERSION").unwrap_or_else(|_| DEFAULT_VERSION.to_string())
}

/// A fetched Cassandra: its jars, and the class-data-sharing archive once one was made.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Distribution {
    pub version: String,
    pub home: PathBuf,
}

impl Distribution {
    pub fn lib(&self) -> PathBuf {
        self.home.join("lib")
    }

    /// The jars, in one order wherever the distribution is copied (`lib/*` would take the
    /// order of a directory listing, which differs between filesystems and breaks an archive).
    pub fn classpath(&self) -> Result<String> {
        let mut jars: Vec<String> = fs::read_dir(self.lib())
            .with_context(|| format!("reading {}", self.lib().display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "jar"))
            .map(|p| p.display().to_string())
            .collect();
        jars.sort();
        Ok(jars.join(":"))
    }

    /// The class-data-sharing archive for this Java and these jars (made at the first clean
    /// stop). Java checks an archive against the class path it was made with; its name holds
    /// a digest of that path, so a distribution that moved or changed makes a new one.
    ///
    /// An archive serves only the JVM build that made it: after an update of Java 17 (Debian's
    /// 17.0.15 to 17.0.21 here) the JVM ignores it without a word and every start is slower, so
    /// the name carries a digest of `java -version` beside the classpath's.
    pub fn cds_archive(&self) -> PathBuf {
        let java = java_version().unwrap_or_default();
        let key = format!("{}\n{java}", self.classpath().unwrap_or_default());
        let digest = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
        let short: String = digest.as_ref()[..4].iter().map(|b| format!("{b:02x}")).collect();
        self.home.join(format!("cds-java{}-{short}.jsa", java_feature_version().unwrap_or(0)))
    }

    /// The cached distribution of `version`, if it was fetched completely.
    pub fn cached(version: &str) -> Option<Distribution> {
        let home = cache_root().join(format!("cassandra-{version}"));
        home.join("lib/.complete").exists().then(|| Distribution { version: version.to_string(), home })
    }

    /// Fetches `version` from Maven Central unless it is cached; `say` hears what happens.
    pub fn fetch(version: &str, say: &mut dyn FnMut(&str)) -> Result<Distribution> {
        if let Some(d) = Distribution::cached(version) {
            return Ok(d);
        }
        if !version.chars().all(|c| c.is_ascii_alphanumeric() || ".-".contains(c)) {
            bail!("Cassandra version \"{version}\" is not a version; use e.g. {DEFAULT_VERSION}");
        }
        let mvn = sys::find_program("mvn")
            .context("fetching Cassandra needs Maven (mvn) and Java 17; install them with `scripts/setup.sh demo` or `apt-get install maven openjdk-17-jre-headless`")?;
        let home = cache_root().join(format!("cassandra-{version}"));
        fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
        let pom = home.join("pom.xml");
        fs::write(&pom, POM.replace("VERSION", version)).with_context(|| format!("writing {}", pom.display()))?;
        let partial = home.join("lib.partial");
        let _ = fs::remove_dir_all(&partial);
        say(&format!("fetching Cassandra {version} and its dependencies from Maven Central into {}", home.display()));
        let started = Instant::now();
        let finished = sys::run(
            Command::new(mvn)
                .args(["-q", "-B", "-f"])
                .arg(&pom)
                .arg(format!("-Dmaven.repo.local={}", cache_root().join("m2").display()))
                .args(["dependency:copy-dependencies", "-DincludeScope=runtime"])
                .arg(format!("-DoutputDirectory={}", partial.display())),
            sys::Options { timeout: Some(Duration::from_secs(1800)), ..Default::default() },
        )?;
        if !finished.status.success() || !partial.join(format!("cassandra-all-{version}.jar")).exists() {
            bail!(
                "Maven could not fetch org.apache.cassandra:cassandra-all:{version} ({}):\n{}",
                finished.status,
                finished.tail(15)
            );
        }
        fs::write(partial.join(".complete"), format!("fetched in {:.1} s\n", started.elapsed().as_secs_f64()))?;
        let lib = home.join("lib");
        let _ = fs::remove_dir_all(&lib);
        fs::rename(&partial, &lib).with_context(|| format!("moving the jars to {}", lib.display()))?;
        say(&format!("fetched Cassandra {version} in {:.1} s", started.elapsed().as_secs_f64()));
        Ok(Distribution { version: version.to_string(), home })
    }
}

pub(super) const POM: &str = r#"<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>isobench</groupId><artifactId>cassandra-fetch</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.cassandra</groupId><artifactId>cassandra-all</artifactId><version>VERSION</version></dependency>
  </dependencies>
</project>
"#;

/// The major version of the `java` on PATH (17 for "17.0.15").
pub fn java_feature_version() -> Option<u32> {
    let quoted = java_version()?.split('"').nth(1)?;
    quoted.split(['.', '-', '+']).next()?.parse().ok()
}

/// What `java -version` says: the version and the JVM's build (without the options it picked
/// up from the environment, which it names first). Asked once per process: a start looks up
/// its archive four times, and each `java -version` costs 35 ms here.
fn java_version() -> Option<&'static str> {
    static TEXT: OnceLock<Option<String>> = OnceLock::new();
    TEXT.get_or_init(|| {
        let out = Command::new("java").arg("-version").output().ok()?;
        let text = String::from_utf8_lossy(&out.stderr);
        Some(text.lines().filter(|l| !l.starts_with("Picked up ")).collect::<Vec<_>>().join("\n"))
    })
    .as_deref()
}

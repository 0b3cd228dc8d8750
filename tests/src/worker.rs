//! [`WorkerProcess`]: a worker in its own process (the `aaa-test-worker` binary), and
//! the [`Ledger`] its tools write.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::server::signal_pid;

/// How a worker process is configured.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// The guard's lease length.
    pub lease_ttl_s: f64,
    /// The consumer's ack wait (default half the lease).
    pub ack_wait_s: Option<f64>,
    /// `"cancel"` or `"finish"`.
    pub lost_lease: &'static str,
    /// The guard's attempt cap.
    pub max_attempts: u32,
    /// Calls one worker runs at once.
    pub max_in_flight: usize,
    /// The replicas of the stream and bucket (3 on a cluster).
    pub replicas: usize,
    /// Further servers of the cluster (the worker fails over to them).
    pub more_servers: Vec<String>,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            lease_ttl_s: 2.0,
            ack_wait_s: None,
            lost_lease: "cancel",
            max_attempts: 3,
            max_in_flight: 64,
            replicas: 1,
            more_servers: Vec::new(),
        }
    }
}

/// A running worker process, killed when dropped.
pub struct WorkerProcess {
    child: Child,
    id: String,
}

impl WorkerProcess {
    /// Starts `binary` (the `aaa-test-worker` path) against `url`, writing to `ledger`,
    /// and waits for it to report ready.
    pub async fn spawn(
        binary: &Path,
        url: &str,
        ledger: &Ledger,
        settings: &WorkerSettings,
    ) -> WorkerProcess {
        let mut command = Command::new(binary);
        command
            .env("AAA_NATS_URL", url)
            .env("AAA_LEDGER", ledger.path())
            .env("AAA_LEASE_TTL_S", settings.lease_ttl_s.to_string())
            .env("AAA_LOST_LEASE", settings.lost_lease)
            .env("AAA_MAX_ATTEMPTS", settings.max_attempts.to_string())
            .env("AAA_MAX_IN_FLIGHT", settings.max_in_flight.to_string())
            .env("AAA_REPLICAS", settings.replicas.to_string())
            .env("AAA_MORE_SERVERS", settings.more_servers.join(","))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(ack_wait) = settings.ack_wait_s {
            command.env("AAA_ACK_WAIT_S", ack_wait.to_string());
        }
        let mut child = command.spawn().expect("the worker starts");
        let stdout = child.stdout.take().expect("its stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the worker reports ready within 30 s")
            .expect("its stdout is readable")
            .expect("it printed a line");
        let id = line
            .strip_prefix("ready ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        WorkerProcess { child, id }
    }

    /// Its worker id (as in guard facts).
    pub fn id(&self) -> &str {
        &self.id
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("the worker is running")
    }

    /// SIGKILL, and waits for it to be gone.
    pub async fn kill(mut self) {
        signal_pid(self.pid(), "KILL");
        let _ = self.child.wait().await;
    }

    /// SIGSTOP: the process freezes, its connection stays open.
    pub fn pause(&self) {
        signal_pid(self.pid(), "STOP");
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self) {
        signal_pid(self.pid(), "CONT");
    }

    /// Waits for the process to exit by itself (a crashing tool) and returns whether it
    /// did within `within`.
    pub async fn exited_within(&mut self, within: Duration) -> bool {
        tokio::time::timeout(within, self.child.wait())
            .await
            .is_ok()
    }
}

/// One line of the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerLine {
    /// `start` or `done`.
    pub event: String,
    /// The idempotency key.
    pub key: String,
    /// The attempt.
    pub attempt: u32,
    /// The worker id.
    pub worker: String,
}

/// The file the test tools append to.
pub struct Ledger {
    dir: tempfile::TempDir,
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

impl Ledger {
    /// An empty ledger in a temporary directory.
    pub fn new() -> Ledger {
        Ledger {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("ledger")
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<LedgerLine> {
        let text = std::fs::read_to_string(self.path()).unwrap_or_default();
        text.lines()
            .map(|line| {
                let parts: Vec<&str> = line.split(' ').collect();
                assert_eq!(parts.len(), 4, "a ledger line has 4 fields: {line:?}");
                LedgerLine {
                    event: parts[0].to_owned(),
                    key: parts[1].to_owned(),
                    attempt: parts[2].parse().expect("an attempt number"),
                    worker: parts[3].to_owned(),
                }
            })
            .collect()
    }

    /// How many times each key was started and finished: `key → (starts, dones)`.
    pub fn counts(&self) -> HashMap<String, (usize, usize)> {
        let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
        for line in self.lines() {
            let entry = counts.entry(line.key).or_default();
            match line.event.as_str() {
                "start" => entry.0 += 1,
                _ => entry.1 += 1,
            }
        }
        counts
    }
}

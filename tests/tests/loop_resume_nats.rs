//! A `ToolLoop` that resumes across processes over NATS: the loop runs in its own
//! process (the `aaa-test-loop` binary), the tool in a worker process
//! (`aaa-test-worker`), both against a real `nats-server`. The loop's process is
//! killed with SIGKILL after its tool call completed and before the next model turn,
//! then started again on the same run id: it must finish without running the tool
//! again and without asking the model again for the turn it had.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use aaa_loop::facts::LOOP_TURN;
use aaa_tests::{Ledger, NatsServer, WorkerProcess, WorkerSettings, facts_until_now};
use aaa_tools::event::{TOOL_COMPLETED, TOOL_REQUESTED};
use aaa_tools::{RunId, new_run_id};
use aaa_tools_nats::NatsOptions;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// How long any one step may take before the test gives up (a generous bound on a
/// loaded machine; every wait ends at an event well before it).
const STEP: Duration = Duration::from_secs(60);

/// A loop process and the lines it prints.
struct LoopProcess {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl LoopProcess {
    /// Starts the loop on `run`; with `hang_at`, its model never answers that turn.
    fn spawn(url: &str, run: &RunId, hang_at: Option<u32>) -> LoopProcess {
        let mut command = Command::new(Path::new(env!("CARGO_BIN_EXE_aaa-test-loop")));
        command
            .env("AAA_NATS_URL", url)
            .env("AAA_RUN_ID", run.as_str())
            .env_remove("AAA_HANG_AT_TURN")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(turn) = hang_at {
            command.env("AAA_HANG_AT_TURN", turn.to_string());
        }
        let mut child = command.spawn().expect("the loop process starts");
        let stdout = child.stdout.take().expect("its stdout");
        LoopProcess {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// The next line it prints; `None` once it closed its stdout (it exited).
    async fn next_line(&mut self) -> Option<String> {
        tokio::time::timeout(STEP, self.lines.next_line())
            .await
            .expect("the loop process prints its next line in time")
            .expect("its stdout is readable")
    }

    /// Reads lines until `line`; the lines before it.
    async fn until(&mut self, line: &str) -> Vec<String> {
        let mut before = Vec::new();
        loop {
            match self.next_line().await {
                Some(next) if next == line => return before,
                Some(next) => before.push(next),
                None => panic!("the loop process exited before {line:?}; it printed {before:?}"),
            }
        }
    }

    /// SIGKILL, and waits for it to be gone.
    async fn kill(mut self) {
        self.child.start_kill().expect("SIGKILL is sent");
        let status = self.child.wait().await.expect("the process is reaped");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
    }

    /// Every remaining line, once it exited successfully.
    async fn finish(mut self) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(line) = self.next_line().await {
            lines.push(line);
        }
        let status = tokio::time::timeout(STEP, self.child.wait())
            .await
            .expect("the loop process exits in time")
            .expect("the process is reaped");
        assert!(
            status.success(),
            "the loop process failed ({status}); it printed {lines:?}"
        );
        lines
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_killed_between_turns_resumes_in_a_new_process() {
    let Some(server) = NatsServer::start() else {
        return;
    };
    let ledger = Ledger::new();
    let worker_binary = Path::new(env!("CARGO_BIN_EXE_aaa-test-worker"));
    let settings = WorkerSettings::default();
    let _worker = WorkerProcess::spawn(worker_binary, &server.url(), &ledger, &settings).await;
    let run = new_run_id();
    // The call's idempotency key: tenant, run, and the loop's id for call `call_work`
    // of turn 0.
    let key = format!("default/{run}/t0-call_work");

    // The first process: turn 0 calls `work`; once its outcome is in, the model is
    // asked for turn 1 and never answers. Killed there.
    let mut first = LoopProcess::spawn(&server.url(), &run, Some(1));
    assert_eq!(first.until("asked 1").await, ["asked 0"]);
    first.kill().await;
    assert_eq!(
        ledger.counts().get(&key),
        Some(&(1, 1)),
        "the tool ran to its end before the model was asked again: {:?}",
        ledger.lines()
    );

    // The next process, same run: turn 0 and the call's outcome come from the run.
    let second = LoopProcess::spawn(&server.url(), &run, None);
    let lines = second.finish().await;
    assert_eq!(
        lines,
        [
            "asked 1".to_owned(),
            format!("final work {key} done at attempt 1"),
            "resumed 1".to_owned(),
        ]
    );
    assert_eq!(ledger.counts().len(), 1, "{:?}", ledger.lines());
    assert_eq!(
        ledger.counts().get(&key),
        Some(&(1, 1)),
        "{:?}",
        ledger.lines()
    );

    // The run's record: the call requested and completed once, two turns: the first
    // in the request of its call, the last (no calls) on its own.
    let client = NatsOptions::new(server.url())
        .connect()
        .await
        .expect("a client");
    let facts = facts_until_now(&client.run(run)).await;
    let count = |kind: &str| facts.iter().filter(|fact| fact.kind == kind).count();
    assert_eq!(count(TOOL_REQUESTED), 1, "{facts:?}");
    assert_eq!(count(TOOL_COMPLETED), 1, "{facts:?}");
    assert_eq!(count(LOOP_TURN), 1, "{facts:?}");
    let request = facts.iter().find(|fact| fact.kind == TOOL_REQUESTED);
    let attached = &request.expect("counted above").data["attachment"];
    assert_eq!(attached["type"], LOOP_TURN, "{attached}");
    assert_eq!(attached["data"]["turn"], 0, "{attached}");
}

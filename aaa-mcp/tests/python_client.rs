//! The official Python MCP SDK (`mcp`) as the client, over stdio and Streamable HTTP, in
//! both protocol eras (`legacy`: the `2025-11-25` handshake; `2026-07-28`: stateless):
//! it lists and calls tools, reads an isError failure, follows a progress stream,
//! answers an approval form (elicitation before `2026-07-28`, an `input_required`
//! round on it) and declines another, and sends one request twice under an
//! idempotency key. The script is `tests/python/mcp_client.py`.
//!
//! A test binary of its own (`harness = false`): run with `--serve-stdio`, it is the
//! stdio server the Python client launches.
//!
//! The interpreter: `AAA_MCP_PYTHON`, else the workspace's `target/mcp-py-venv`
//! (`scripts/mcp-conformance` makes it, with a pinned `mcp`), else `AAA_PYTHON`, else
//! `python3`; the first that imports `mcp`. Without one the tests are skipped with a
//! printed reason, unless `AAA_REQUIRE_PYTHON=1`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use aaa_mcp::{HttpOptions, HttpServer};
use serde_json::{Value, json};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    if args.iter().any(|a| a == "--serve-stdio") {
        runtime.block_on(serve_stdio());
        return;
    }
    if args.iter().any(|a| a == "--list") {
        // `cargo test -- --list`: one test, by this binary's name.
        println!("python_client: test");
        return;
    }
    let Some(python) = python() else {
        return;
    };
    let mut failures = Vec::new();
    for mode in ["legacy", "2026-07-28"] {
        for transport in ["stdio", "http"] {
            let name = format!("{transport} {mode}");
            let outcome = runtime.block_on(run(&python, mode, transport));
            match outcome {
                Ok(()) => println!("test python client over {name} ... ok"),
                Err(error) => {
                    println!("test python client over {name} ... FAILED");
                    failures.push(format!("{name}: {error}"));
                }
            }
        }
    }
    if !failures.is_empty() {
        eprintln!("failures:\n{}", failures.join("\n"));
        std::process::exit(1);
    }
}

/// Serves the test tools on stdin/stdout, for the Python client to launch.
async fn serve_stdio() {
    let test = support::server().await;
    aaa_mcp::serve_stdio(test.server)
        .await
        .expect("the stdio session ends cleanly");
}

/// The first interpreter that can import `mcp`.
fn python() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-py-venv/bin/python");
    let candidates = [
        std::env::var_os("AAA_MCP_PYTHON").map(PathBuf::from),
        venv.exists().then_some(venv),
        std::env::var_os("AAA_PYTHON").map(PathBuf::from),
    ];
    for candidate in candidates.into_iter().flatten() {
        let imports = std::process::Command::new(&candidate)
            .args(["-c", "import mcp"])
            .output()
            .is_ok_and(|out| out.status.success());
        if imports {
            return Some(candidate);
        }
    }
    support::python_with("mcp")
}

/// One run of the Python client; checks its report.
async fn run(python: &Path, mode: &str, transport: &str) -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_client.py");
    let mut command = tokio::process::Command::new(python);
    command.arg(&script).args(["--mode", mode]);
    // The HTTP server lives as long as this run.
    let mut _http = None;
    let mut runs = None;
    match transport {
        "stdio" => {
            let me = std::env::current_exe().map_err(|e| e.to_string())?;
            command.arg("--stdio").arg(me).arg("--serve-stdio");
        }
        _ => {
            let test = support::server().await;
            runs = Some(test.runs.clone());
            let options = HttpOptions::new(0).token("py-secret");
            let http = HttpServer::start(test.server, options)
                .await
                .map_err(|e| e.to_string())?;
            command
                .args(["--http", &http.url()])
                .args(["--token", "py-secret"]);
            _http = Some((http, test.worker));
        }
    }
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .map_err(|_| "the Python client did not finish within 120 s".to_owned())?
        .map_err(|e| format!("the Python client did not start: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .ok_or_else(|| format!("no report; stdout: {stdout}\nstderr: {stderr}"))?;
    if !output.status.success() {
        return Err(format!("{report}\nstderr: {stderr}"));
    }
    check(&report, mode).map_err(|e| format!("{e}\nreport: {report}"))?;
    if let Some(runs) = runs {
        // Over HTTP the server is ours: one payment (the approved one), one counted run.
        if runs.payments() != 1 || runs.counted() != 1 {
            return Err(format!(
                "tool runs: {} payments, {} counted (expected 1 and 1)",
                runs.payments(),
                runs.counted()
            ));
        }
    }
    Ok(())
}

/// What the report must say.
fn check(report: &Value, mode: &str) -> Result<(), String> {
    let expect = |what: &str, got: &Value, want: Value| {
        if *got == want {
            Ok(())
        } else {
            Err(format!("{what}: got {got}, want {want}"))
        }
    };
    let protocol = if mode == "legacy" { "2025-11-25" } else { mode };
    expect("protocol", &report["protocol"], json!(protocol))?;
    expect(
        "tools",
        &report["tools"],
        json!([
            "add",
            "greet",
            "fail",
            "counted",
            "stepwise",
            "send_payment",
            "sleepy",
            "ask_name"
        ]),
    )?;
    expect(
        "add's output schema type",
        &report["add_output_schema"]["type"],
        json!("object"),
    )?;
    expect("add", &report["add"]["structured"], json!({"sum": 42}))?;
    expect("add is_error", &report["add"]["is_error"], json!(false))?;
    expect("add text", &report["add"]["text"], json!(r#"{"sum":42}"#))?;
    expect("fail is_error", &report["fail"]["is_error"], json!(true))?;
    expect(
        "fail text",
        &report["fail"]["text"],
        json!("error (error): the ledger is closed on Sundays"),
    )?;
    expect(
        "stepwise",
        &report["stepwise"]["text"],
        json!("4 steps done"),
    )?;
    let progress: Vec<f64> = report["stepwise"]["progress"]
        .as_array()
        .map(|steps| {
            steps
                .iter()
                .filter_map(|s| s["progress"].as_f64())
                .collect()
        })
        .unwrap_or_default();
    if progress != [1.0, 2.0, 3.0, 4.0] {
        return Err(format!(
            "progress stream: got {progress:?}, want [1, 2, 3, 4]"
        ));
    }
    expect(
        "progress total",
        &report["stepwise"]["progress"][3]["total"],
        json!(4.0),
    )?;
    expect(
        "payment is_error",
        &report["payment"]["is_error"],
        json!(false),
    )?;
    expect(
        "payment",
        &report["payment"]["structured"]["paid"],
        json!(1250),
    )?;
    expect(
        "approved by",
        &report["payment"]["approval"]["by"],
        json!("client"),
    )?;
    let forms = report["payment"]["forms"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let form = forms.first().and_then(Value::as_str).unwrap_or_default();
    if forms.len() != 1 || !form.contains("`send_payment`") || !form.contains("1250") {
        return Err(format!("approval forms: {forms:?}"));
    }
    let resent = &report["resent"];
    expect("re-sent request", &resent[0], resent[1].clone())?;
    expect("runs of the keyed call", &resent[0]["run"], json!(1))?;
    expect(
        "denied is_error",
        &report["denied"]["is_error"],
        json!(true),
    )?;
    let denied = report["denied"]["text"].as_str().unwrap_or_default();
    if !denied.starts_with("error (denied): ") {
        return Err(format!("denied text: {denied}"));
    }
    expect("denial forms", &report["denied"]["forms"], json!(1))
}

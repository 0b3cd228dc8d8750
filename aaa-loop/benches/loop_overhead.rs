//! What `ToolLoop` adds to each turn, against the same calls made directly.
//!
//! Both paths run on one embedded engine with one `add` tool, the caller a task on
//! the runtime (as an agent loop is), in one run of this program:
//!
//! - `direct`: a new run, then `RunHandle::call("add", ..)` N times;
//! - `loop`: a new run, then `ToolLoop::run` with an instant `ScriptedModel` that
//!   makes one `add` call a turn for N turns, then answers.
//!
//! A loop pays once per run (reading the run's facts back, recording its input, the
//! final turn and its end) and once per turn (recording the turn, building the call
//! and the conversation). The summary separates the two: measuring each path at
//! N = [`SHORT`] and N = [`LONG`], the per-turn cost is the slope between them, and
//! the ratio of the slopes is what the loop adds per turn (target: at most 1.10).
//! Each round runs the four (path, length) pairs one run at a time, in turn, for
//! [`ROUND_SPAN`], and times each run alone: the paths see the same engine state, and
//! a slow phase of the machine (they last milliseconds or more) falls on all four
//! alike. The figures are medians over rounds. The summary runs twice: on a runtime
//! of two worker threads, then on a current-thread runtime, where no call pays a
//! thread wake-up (whose cost on a virtual machine moves with the machine's load).
//! The bench only measures and prints; it never asserts a time.
//!
//! ```text
//! cargo bench -p aaa-loop --bench loop_overhead               # criterion, then the summary
//! cargo bench -p aaa-loop --bench loop_overhead -- --summary  # the summary alone
//! ```
//!
//! Wall time on a shared machine moves by tens of percent from run to run;
//! instruction counts do not. `--count direct|loop N R` runs one path `R` times at
//! length `N` on a current-thread runtime (no thread wake-ups) and exits; counted
//! with valgrind at `N` = 25 and `N` = 5, the difference divided by `20 R` is the
//! cost of one call or turn, the per-run costs cancelled:
//!
//! ```text
//! cargo bench -p aaa-loop --bench loop_overhead --no-run        # prints the binary's path
//! valgrind --tool=callgrind <binary> --bench --count loop 25 40  # then loop 5 40, direct 25 40, direct 5 40
//! ```
//!
//! ## What it measured
//!
//! Instructions per turn, counted as above, the loop of commit 1cfd9bb and this one
//! built against the same engine: a direct call 55 000; a loop turn 69 000 before
//! (1.257), 58 700 now (1.067). Three changes, measured one after the other:
//!
//! - the fact that records a turn kept a copy of it (each `ProviderCall` strings and a
//!   JSON map, an allocation each): the conversation, the fact and the loop's events
//!   share one turn now (`Message::assistant`), 3 000 a turn;
//! - the result the model reads copied each call again, the engine's request copied
//!   the tool's name, and the scripted model copied its turn: a call's parts are
//!   shared now (`ProviderCall`), 6 300, about half of it the loop's;
//! - each fact copied the engine's `source`, wrote its subject and `format!`ted its id:
//!   a loop makes them once now (`facts::Recorder`), 2 700.
//!
//! What a turn still adds, about 6 600: its fact on the bus (1 900 to append it,
//! de-duplicate its id and match it against the bus's subscribers, and 900 to free it
//! with the log), the copy of the arguments the engine's request takes
//! (`ToolCall::arguments` is an owned `Value`, and the recorded turn keeps them:
//! 1 400), the turn-scoped call id (1 000), the scripted model's list of calls and
//! boxed future (800), the turn's `Arc`, the results' `Vec` and the step machinery.
//! A direct call pays about 2 900 that the loop does not: its fresh random call id,
//! the engine's parsing of its facts' subjects (which that longer id lengthens), and
//! building its arguments where the loop copies them.
//!
//! Since then the engine's calls got cheaper (outcome subjects read once), which the
//! loop's turns share: a direct call 50 100, a loop turn 55 050 (1.099).
//!
//! Wall time moves with the load of the machine. On a 2-core virtual machine shared
//! with other builds (load 3 to 5), the two binaries interleaved: the summary's
//! per-turn ratio over seven runs 1.17 to 1.39, median 1.24 (before: 1.17 to 1.78,
//! median 1.35); timed on a current-thread runtime (`--count`, the slope between 25
//! and 5 turns) 1.12 to 1.14 at load 3 (before: 1.24 to 1.28). Wall time stays above
//! the instruction ratio: what a loop keeps (the conversation, its facts) misses the
//! data cache more often than a direct call (1 240 misses a turn against 980 in
//! valgrind's cache model).
//!
//! Later, on an idle 2-core virtual machine (load under 1), seven summaries in a
//! row: on two worker threads 1.10 to 1.25, median 1.16; on a current-thread runtime
//! 1.06 to 1.19, median 1.12. Counted by cachegrind (`--count`, 200 runs): a turn
//! 51 900 instructions, 1 294 first-level data misses and 49 last-level ones; a
//! direct call 47 700, 1 080 and 41 (1.088, 1.20, 1.18). The last-level misses are
//! mostly writes to memory the log freed long before: a turn's fact is one more
//! message than a direct call keeps.
//!
//! Then the engine's request took the turn's arguments without a copy
//! (`ToolCall::arguments` is an `Arc<Value>`, [`aaa_loop::Arguments`] hands over the
//! same allocation): a turn 49 900 instructions, 1 297 first-level data misses and 44
//! last-level ones; a direct call 47 500, 1 065 and 42 (1.049, 1.22, 1.04). Timed,
//! the binaries before and after interleaved, six summaries each on an idle machine:
//! on two worker threads medians 1.35 before, 1.20 after; on a current-thread runtime
//! 1.16 and 1.16. The first-level data misses, unchanged, keep wall time above the
//! instruction ratio. A direct call itself took 11 to 26 µs from one summary to the
//! next, so the summary also prints each round's own ratio (its four timings taken
//! within about a second of each other), in which a slow phase lasting a round
//! cancels. Here it spread as widely as the plain ratio: seven summaries after,
//! medians 1.30 (two threads) and 1.17 (current-thread); the noise is within rounds.
//!
//! So the rounds now interleave single runs, where each path had a span of its own
//! (300 ms) and a slow phase could fall on one path only. Same code, same idle
//! machine: a round's own ratio, which had spread from 0.72 to 2.47 within one
//! summary, spreads from about 1.06 to 1.31, and the medians of eight summaries in
//! a row sit between 1.15 and 1.19 on both runtimes (plain per-turn ratio 1.09 to
//! 1.19). That is the loop's real cost on this machine, above the target. Taken
//! apart with the same summary, one change at a time, each tried and undone:
//!
//! - without the turn's fact (not durable: measurement only) the paired medians fell
//!   to 1.04 to 1.11. Recording a turn costs about what any message on the embedded
//!   bus costs (3 100 instructions a turn by cachegrind, `--count` as above: append,
//!   de-duplicate, trim, allocate), and a call already makes three;
//! - the turn's fact without its id (no de-duplication): 1.13 to 1.17, within noise
//!   in that sitting (kept later: see below);
//! - the fact holding the turn number only, not the turn: no faster (1.20 to 1.23);
//! - both histories bounded to 1 000 (messages, settled calls): every call faster
//!   (a direct call 10 µs against 14 µs), the ratio the same (1.14 to 1.19);
//! - the many-call path of a turn boxed, out of the loop's future: unchanged.
//!
//! Without the fact, a turn and a direct call count the same instructions (48 900
//! against 49 000), and the turn still takes 4 to 11 % longer: 180 more first-level
//! instruction misses (137 in the loop's own future, whose code for one turn spans
//! some 9 KB) and 210 more data misses. What is left to win is the cost of a message
//! on the bus, which every call pays three times over, and the loop's code size.
//!
//! Later still, the turn's fact went on the bus without a de-duplication id (readers
//! take the first fact of each turn number, so the bus need not drop a repeat: see
//! [`aaa_loop::facts`]). Counted as above, a turn 51 950 instructions before, 51 329
//! after, against a direct call's 49 369 (1.052 to 1.040): the id's admission into
//! the bus's 100 000-entry window is three probes of a table that no longer fits a
//! cache. Timed, the two binaries alternating, six summaries each on an idle
//! machine, the paired medians:
//!
//! | | two worker threads | current-thread runtime |
//! |---|---|---|
//! | before | 1.155 to 1.181, median 1.159 | 1.148 to 1.166, median 1.162 |
//! | after | 1.107 to 1.154, median 1.116 | 1.141 to 1.165, median 1.150 |
//!
//! Six more summaries of the same binary, later in the same sitting: medians 1.128
//! and 1.140. Cachegrind (`--count`, 40 runs of 25 and of 5) says what stays: a turn
//! misses the first-level instruction cache 3 031 times to a direct call's 2 813
//! (1.077), the first-level data cache 1 230 to 1 045 (1.177), the last level 49 to
//! 44, for 1.040 of its instructions; 139 of a turn's instruction misses are in the
//! loop's own future, against 45 in the direct caller's. Without the turn's fact
//! (not durable: measurement only) the paired medians were 1.02 to 1.06: recording a
//! turn is still the larger part of what a turn adds, and it is one message on the
//! bus like any other. Tried in the same sitting and not kept, none of them outside
//! the noise of the table above (a few hundredths either way from one run of six
//! summaries to the next): the turn's number written without `core::fmt` and each
//! call id built on the stack (two allocations fewer a turn, 50 910 instructions);
//! with that, a turn's event id kept as a shared prefix and its number, written only
//! when the fact is (one more fewer, 50 523); and the loop's two steps polled from
//! functions of their own, apart from the loop's future (more cache misses a turn,
//! not fewer: 3 057 and 1 300).
//!
//! Then a turn stopped being a message of its own: the first call it leads to
//! carries it, in the same message as its request
//! ([`aaa_tools::event::Attachment`]; see [`aaa_loop::facts`]). Counted as above, a
//! turn 51 406 instructions before, 49 864 after, against a direct call's 49 400 and
//! 49 533 (a request has one field more): 1.041 to 1.007; first-level misses a turn
//! 3 029 to 2 983 (instructions) and 1 232 to 1 204 (data), a direct call's 2 833
//! and 1 036. Timed, the binaries before (79ae29a) and after alternating, eight
//! summaries each on an idle machine, the paired medians:
//!
//! | | two worker threads | current-thread runtime |
//! |---|---|---|
//! | before | 1.082 to 1.160, median 1.114 | 1.132 to 1.154, median 1.145 |
//! | after | 1.067 to 1.127, median 1.094 | 1.055 to 1.094, median 1.070 |
//!
//! Within the target on both runtimes. On two worker threads the loop's task and the
//! tool's run on either thread, and a turn's data (the conversation, the loop's
//! future) follows the loop from one core's cache to the other's: what a turn touches
//! beyond a direct call, about 170 first-level data misses, costs more there, and the
//! spread from one summary to the next is as wide as the distance to the target.
//!
//! Without `--bench` (as under `cargo test --benches`) it runs each path once and
//! checks the answers.

use std::hint::black_box;
use std::time::{Duration, Instant};

use aaa_loop::{
    ArgumentsOrProblem, AssistantTurn, Limits, LoopEnd, Message, ProviderCall, ScriptedModel,
    ToolLoop,
};
use aaa_tools::{Engine, HandlerHandle, ToolHandler, ToolRegistry, tool, tools};
use criterion::Criterion;
use serde_json::json;
use tokio::runtime::Runtime;

/// Turns (or calls) of a short run.
const SHORT: u32 = 5;
/// Turns (or calls) of a long run.
const LONG: u32 = 25;
/// Rounds of the summary.
const ROUNDS: usize = 9;
/// How long each round of the summary runs the four paths, one run of each in turn.
const ROUND_SPAN: Duration = Duration::from_millis(1200);

/// Add two integers.
///
/// # Arguments
/// * `a` - The first.
/// * `b` - The second.
#[tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

struct Subject {
    engine: Engine,
    _worker: HandlerHandle,
}

impl Subject {
    async fn new() -> Subject {
        let engine = Engine::embedded();
        let registry = ToolRegistry::new(tools![add]).expect("a registry");
        let worker = ToolHandler::new(registry)
            .attach(&engine)
            .await
            .expect("a handler");
        Subject {
            engine,
            _worker: worker,
        }
    }

    /// `calls` calls of `add` on a new run; the sum of the results.
    async fn direct(&self, calls: u32) -> i64 {
        let run = self.engine.new_run();
        let mut sum = 0;
        for i in 0..calls {
            let outcome = run
                .call("add", json!({"a": i, "b": 1}))
                .await
                .expect("an outcome");
            sum += outcome.result().and_then(|r| r.as_i64()).expect("a sum");
        }
        sum
    }

    /// A loop of `turns` turns with one `add` call each, then an answer, on a new run.
    async fn looped(&self, agent: &ToolLoop) -> LoopEnd {
        let run = self.engine.new_run();
        let input = vec![Message::user("add")];
        agent.run(&run, input).await.expect("a loop").end
    }
}

/// A loop whose model makes one `add` call a turn for `turns` turns, then answers.
/// The turns are made up front: the model costs a copy of one per turn.
fn agent(turns: u32) -> ToolLoop {
    let script: Vec<AssistantTurn> = (0..turns)
        .map(|turn| {
            let arguments = ArgumentsOrProblem::from_value(json!({"a": turn, "b": 1}));
            let call = ProviderCall::new(format!("call_{turn}"), "add", arguments);
            AssistantTurn::tool_calls([call])
        })
        .collect();
    let done = AssistantTurn::answer("done");
    let model = ScriptedModel::from_fn(move |request| {
        script.get(request.turn as usize).unwrap_or(&done).clone()
    })
    .record_requests(false);
    ToolLoop::new(model, tools![add]).with_limits(Limits::default().with_max_turns(turns + 1))
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Runs `work` as a task on the runtime (the caller's placement in an agent).
fn as_task<T: Send + 'static>(rt: &Runtime, work: impl Future<Output = T> + Send + 'static) -> T {
    rt.block_on(async { tokio::spawn(work).await.expect("the task") })
}

/// Which path, at which length.
#[derive(Clone, Copy)]
enum Path {
    Direct(u32),
    Loop(u32),
}

impl Path {
    /// The loop a run of this path drives, made once for all its runs.
    fn agent(self) -> Option<ToolLoop> {
        match self {
            Path::Loop(turns) => Some(agent(turns)),
            Path::Direct(_) => None,
        }
    }

    /// One run of this path; `agent` is [`Path::agent`]'s.
    async fn run(self, subject: &Subject, agent: Option<&ToolLoop>) {
        match (self, agent) {
            (Path::Direct(calls), _) => {
                black_box(subject.direct(calls).await);
            }
            (Path::Loop(_), Some(agent)) => {
                black_box(subject.looped(agent).await);
            }
            (Path::Loop(_), None) => unreachable!("a loop path has its agent"),
        }
    }
}

/// Runs `path` `rounds` times as a task; the time it took.
fn timed(rt: &Runtime, subject: &std::sync::Arc<Subject>, path: Path, rounds: u64) -> Duration {
    let subject = subject.clone();
    as_task(rt, async move {
        let agent = path.agent();
        let start = Instant::now();
        for _ in 0..rounds {
            path.run(&subject, agent.as_ref()).await;
        }
        start.elapsed()
    })
}

fn criterion_groups(c: &mut Criterion, rt: &Runtime, subject: &std::sync::Arc<Subject>) {
    let mut group = c.benchmark_group(format!("loop_overhead/{LONG}_turns"));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for (name, path) in [("direct", Path::Direct(LONG)), ("loop", Path::Loop(LONG))] {
        group.bench_function(name, |b| {
            b.iter_custom(|rounds| timed(rt, subject, path, rounds))
        });
    }
    group.finish();
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One round: a run of each path in turn, over and over for [`ROUND_SPAN`], each run
/// timed alone; each path's mean time per run, in microseconds, in the order of
/// `paths`.
fn round(rt: &Runtime, subject: &std::sync::Arc<Subject>, paths: [Path; 4]) -> [f64; 4] {
    let subject = subject.clone();
    as_task(rt, async move {
        let agents = paths.map(Path::agent);
        let mut took = [Duration::ZERO; 4];
        let mut runs = 0u32;
        let start = Instant::now();
        while start.elapsed() < ROUND_SPAN {
            // Alternate the order, so no path always runs right after another.
            for at in 0..paths.len() {
                let at = if runs.is_multiple_of(2) {
                    at
                } else {
                    paths.len() - 1 - at
                };
                let began = Instant::now();
                paths[at].run(&subject, agents[at].as_ref()).await;
                took[at] += began.elapsed();
            }
            runs += 1;
        }
        took.map(|took| took.as_secs_f64() * 1e6 / f64::from(runs))
    })
}

/// The summary on `rt`, which `placement` names.
fn summary(rt: &Runtime, subject: &std::sync::Arc<Subject>, placement: &str) {
    let paths = [
        Path::Direct(SHORT),
        Path::Loop(SHORT),
        Path::Direct(LONG),
        Path::Loop(LONG),
    ];
    let mut times: [Vec<f64>; 4] = Default::default();
    for _ in 0..ROUNDS {
        for (at, per_run) in round(rt, subject, paths).into_iter().enumerate() {
            times[at].push(per_run);
        }
    }
    let span = f64::from(LONG - SHORT);
    // Each round's own ratio.
    let mut paired: Vec<f64> = (0..ROUNDS)
        .map(|round| {
            let slope = |short: usize, long: usize| times[long][round] - times[short][round];
            slope(1, 3) / slope(0, 2)
        })
        .collect();
    paired.sort_by(f64::total_cmp);
    let (paired_low, paired_high) = (paired[0], paired[ROUNDS - 1]);
    let paired = median(paired);
    let [direct_short, loop_short, direct_long, loop_long] = times.map(median);
    let direct_per_call = (direct_long - direct_short) / span;
    let loop_per_turn = (loop_long - loop_short) / span;
    let loop_fixed = loop_long - loop_per_turn * f64::from(LONG);
    let direct_fixed = direct_long - direct_per_call * f64::from(LONG);
    println!();
    println!(
        "loop_overhead summary (medians of {ROUNDS} rounds, µs, the caller a task on {placement}):"
    );
    println!(
        "  direct: {SHORT} calls {direct_short:8.1}   {LONG} calls {direct_long:8.1}   per call {direct_per_call:6.2}   per run {direct_fixed:6.1}"
    );
    println!(
        "  loop:   {SHORT} turns {loop_short:8.1}   {LONG} turns {loop_long:8.1}   per turn {loop_per_turn:6.2}   per run {loop_fixed:6.1}"
    );
    println!(
        "  per turn: the loop takes {:.3}× a direct call (target ≤ 1.10); a whole run of {LONG} turns {:.3}×, of {SHORT} turns {:.3}×",
        loop_per_turn / direct_per_call,
        loop_long / direct_long,
        loop_short / direct_short,
    );
    println!(
        "  per turn, paired within each round: median {paired:.3}× (rounds {paired_low:.3}× to {paired_high:.3}×)"
    );
}

/// Without `--bench`: each path once, answers checked.
fn smoke(rt: &Runtime, subject: &std::sync::Arc<Subject>) {
    let s = subject.clone();
    let (sum, end) = as_task(rt, async move {
        (s.direct(SHORT).await, s.looped(&agent(SHORT)).await)
    });
    assert_eq!(sum, (1..=i64::from(SHORT)).sum::<i64>());
    assert_eq!(end, LoopEnd::Final("done".into()));
}

/// `--count direct|loop N R`: `R` runs of one path at length `N`, on a
/// current-thread runtime (no thread wake-ups), for an instruction counter; see the
/// module docs.
fn count(args: &[String]) -> bool {
    let Some(at) = args.iter().position(|arg| arg == "--count") else {
        return false;
    };
    let usage = "--count direct|loop N R";
    let number = |at: usize| -> u32 { args.get(at).and_then(|n| n.parse().ok()).expect(usage) };
    let (path, n, runs) = (args.get(at + 1).cloned(), number(at + 2), number(at + 3));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let subject = Subject::new().await;
        let agent = agent(n);
        for _ in 0..runs {
            match path.as_deref() {
                Some("direct") => {
                    black_box(subject.direct(n).await);
                }
                Some("loop") => {
                    black_box(subject.looped(&agent).await);
                }
                _ => panic!("{usage}"),
            }
        }
    });
    true
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if count(&args) {
        return;
    }
    let rt = runtime();
    let subject = std::sync::Arc::new(rt.block_on(Subject::new()));
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    if !benchmarking {
        smoke(&rt, &subject);
        return;
    }
    // `--summary`: the summary alone (criterion would refuse the argument).
    if !std::env::args().any(|arg| arg == "--summary") {
        let mut criterion = Criterion::default().configure_from_args();
        criterion_groups(&mut criterion, &rt, &subject);
        criterion.final_summary();
    }
    summary(&rt, &subject, "2 worker threads");
    // The same on one thread: no thread wake-ups, whose cost on a virtual machine
    // moves with its load, so the ratio moves less from run to run.
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let alone = std::sync::Arc::new(current.block_on(Subject::new()));
    summary(&current, &alone, "a current-thread runtime");
}

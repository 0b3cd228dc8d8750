//! What the `Boxed:` comments in [`RunHandle`](aaa_tools::RunHandle)'s waits buy: a
//! caller's future holds only the common path (request, then wait for the outcome),
//! so awaiting a call costs a caller, or a task per call, that much and no more. The
//! lookup of an outcome heard from nowhere and the first wait's listener set-up are
//! boxed. It is 488 bytes in a test build; unboxing either makes it 872 or 688, past
//! this bound. If a change must grow it, raise the bound knowingly.

use aaa_tools::Engine;
use serde_json::json;

#[tokio::test]
async fn a_calls_future_stays_small() {
    let engine = Engine::embedded();
    let run = engine.new_run();
    let call = run.call("add", json!({"a": 1, "b": 2}));
    let size = std::mem::size_of_val(&call);
    println!("RunHandle::call's future: {size} bytes");
    assert!(size <= 512, "RunHandle::call's future is {size} bytes");
}

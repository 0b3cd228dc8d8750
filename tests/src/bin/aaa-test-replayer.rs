//! A client process that replays one run and never finishes, for the test that kills a
//! client mid-replay: connects to `AAA_NATS_URL`, reads run `AAA_RUN`'s facts through
//! `RunHandle::facts`, prints `replaying` once it has read the first one, and waits
//! (holding the replay open) until it is killed.

use std::io::Write;

use aaa_tools::RunId;
use aaa_tools_nats::NatsOptions;
use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("AAA_NATS_URL").map_err(|_| "AAA_NATS_URL is required")?;
    let run = RunId::new(std::env::var("AAA_RUN").map_err(|_| "AAA_RUN is required")?)?;
    let engine = NatsOptions::new(url).connect().await?;
    let mut facts = engine.run(run).facts().await?;
    facts.next().await.ok_or("the run has no facts")??;
    println!("replaying");
    std::io::stdout().flush()?;
    std::future::pending::<()>().await;
    Ok(())
}

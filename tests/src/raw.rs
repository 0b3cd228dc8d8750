//! [`RawJetStream`]: the least a durable call costs on a JetStream server, the
//! baseline the `nats` and `scale` benches compare the engine with.

use async_nats::jetstream::{self, consumer::pull};
use futures::StreamExt;

/// A raw durable round trip: publish a request (awaiting the server's ack), take it
/// from a durable pull consumer's prefetching stream, publish a result (awaiting its
/// ack), ack the request.
pub struct RawJetStream {
    js: jetstream::Context,
    messages: tokio::sync::Mutex<pull::Stream>,
}

impl RawJetStream {
    /// Connects to `url` and sets up stream `RAW` and its consumer, which lets up to
    /// `max_ack_pending` requests be in flight.
    pub async fn new(url: &str, max_ack_pending: i64) -> RawJetStream {
        let client = async_nats::connect(url).await.expect("connect");
        let js = jetstream::new(client);
        let stream = js
            .get_or_create_stream(jetstream::stream::Config {
                name: "RAW".into(),
                subjects: vec!["raw.>".into()],
                ..Default::default()
            })
            .await
            .expect("stream");
        let consumer = stream
            .get_or_create_consumer(
                "raw-workers",
                pull::Config {
                    durable_name: Some("raw-workers".into()),
                    filter_subject: "raw.request".into(),
                    max_ack_pending,
                    ..Default::default()
                },
            )
            .await
            .expect("consumer");
        // One pull stream, shared: the client keeps a pull open and prefetches, the
        // cheapest way to consume.
        let messages = consumer.messages().await.expect("pull stream");
        RawJetStream {
            js,
            messages: tokio::sync::Mutex::new(messages),
        }
    }

    /// One round trip, carrying `i`.
    pub async fn one(&self, i: u64) {
        let payload = format!("{{\"a\":{i},\"b\":1}}");
        let acked = self.js.publish("raw.request", payload.into()).await;
        acked.expect("publish").await.expect("puback");
        let message = {
            let mut messages = self.messages.lock().await;
            messages.next().await.expect("a message").expect("ok")
        };
        let result = self.js.publish("raw.result", message.payload.clone()).await;
        result.expect("publish result").await.expect("puback");
        message.ack().await.expect("ack");
    }
}

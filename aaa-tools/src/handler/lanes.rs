//! Lanes: the tasks that handle received messages, one message at a time each.
//!
//! A lane is a long-lived task. The consumer hands each message to an idle lane (the
//! one idle the shortest time, whose memory is the most likely still in cache) and
//! starts a new lane only when every lane is busy, so there are never more lanes than
//! messages the consumer may hold at once. A call's state machine is several
//! kilobytes: spawning a task per message would allocate and free that much per call
//! (too large for the allocator's per-thread caches, so every such allocation takes a
//! lock that the runtime's threads contend for); a lane allocates it once.
//!
//! A lane idle for longer than [`IDLE_FOR`] is let go the next time the consumer hands
//! out a message, so a burst's lanes do not stay for good. Dropping [`Lanes`] aborts
//! every lane, as dropping a set of spawned tasks would; [`Lanes::drain`] lets busy
//! lanes finish first.
//!
//! A panic in a lane's handling (not in a tool: a tool's panic is caught where the tool
//! runs and becomes a `panic` outcome) ends that message's handling, unacknowledged so
//! the bus delivers it again, and is logged; the lane goes on with the next message.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::core::{Core, TICKET, Ticket};
use super::{approval, request};
use crate::bus::Message;

/// What a consumer receives.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Tool requests.
    Request,
    /// Approval decisions.
    Signal,
}

/// Handles one received message of `kind`.
async fn handle(kind: Kind, core: &Core, message: Message) {
    match kind {
        Kind::Request => request::handle_request(core, message).await,
        // Boxed: a decision is rare, and its handling is larger than a request's, so
        // unboxed it would set the size of every request's future (which the lane moves
        // into place for each message): 6,008 bytes instead of 3,928
        // (`tests::a_messages_handling_stays_small`).
        Kind::Signal => Box::pin(approval::handle_signal(core, message)).await,
    }
}

/// How long a lane may stay idle before it is let go.
pub(super) const IDLE_FOR: Duration = Duration::from_secs(30);

/// One message for a lane, with what the consumer holds for it.
struct Job {
    message: Message,
    /// The consumer's room for one message, given back when the lane is idle again.
    slot: OwnedSemaphorePermit,
    /// Counts the call as queued until it holds a pool permit.
    ticket: Ticket,
    /// The lane's own mailbox, which it puts back on the idle list when done (only
    /// the idle list holds it meanwhile: dropping it from there ends the lane).
    mailbox: mpsc::Sender<Job>,
}

/// An idle lane: its mailbox and since when it has waited.
struct Idle {
    mailbox: mpsc::Sender<Job>,
    since: Instant,
}

/// The idle lanes, most recently idle last; `None` once the lanes are draining.
type IdleList = Arc<Mutex<Option<Vec<Idle>>>>;

/// The lanes of one consumer.
pub(super) struct Lanes {
    core: Arc<Core>,
    kind: Kind,
    idle: IdleList,
    tasks: JoinSet<()>,
}

impl Lanes {
    pub(super) fn new(core: Arc<Core>, kind: Kind) -> Lanes {
        Lanes {
            core,
            kind,
            idle: Arc::new(Mutex::new(Some(Vec::new()))),
            tasks: JoinSet::new(),
        }
    }

    /// Hands `message` to an idle lane, or to a new one when none is idle.
    pub(super) fn run(&mut self, message: Message, slot: OwnedSemaphorePermit, ticket: Ticket) {
        // Lanes that ended (let go, or aborted) leave their results here.
        while self.tasks.try_join_next().is_some() {}
        let Some(mailbox) = self.take_idle() else {
            return self.start(message, slot, ticket);
        };
        let job = Job {
            message,
            slot,
            ticket,
            mailbox: mailbox.clone(),
        };
        // An idle lane's mailbox is empty and its lane waits on it; should the lane be
        // gone all the same, the message goes to a new lane.
        if let Err(TrySendError::Full(job) | TrySendError::Closed(job)) = mailbox.try_send(job) {
            self.start(job.message, job.slot, job.ticket);
        }
    }

    /// Starts a lane with `message` as its first.
    fn start(&mut self, message: Message, slot: OwnedSemaphorePermit, ticket: Ticket) {
        let (mailbox, inbox) = mpsc::channel(1);
        let first = Job {
            message,
            slot,
            ticket,
            mailbox,
        };
        let lane = lane(
            self.core.clone(),
            self.kind,
            self.idle.clone(),
            inbox,
            first,
        );
        self.tasks.spawn(lane);
    }

    /// The most recently idle lane's mailbox, letting go of one lane idle too long.
    fn take_idle(&self) -> Option<mpsc::Sender<Job>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let idle = idle.as_mut()?;
        let mailbox = idle.pop().map(|lane| lane.mailbox);
        // Dropping its mailbox ends the lane.
        if idle
            .first()
            .is_some_and(|oldest| oldest.since.elapsed() > IDLE_FOR)
        {
            idle.remove(0);
        }
        mailbox
    }

    /// Lets busy lanes finish their message for up to `deadline` (idle lanes end at
    /// once), then aborts the rest: their messages stay unacknowledged.
    pub(super) async fn drain(mut self, deadline: Duration) {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).take();
        let _ = tokio::time::timeout(deadline, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// A lane: handles `first`, then the messages put in its inbox, one at a time, until
/// it is let go.
async fn lane(
    core: Arc<Core>,
    kind: Kind,
    idle: IdleList,
    mut inbox: mpsc::Receiver<Job>,
    first: Job,
) {
    let mut job = first;
    loop {
        let Job {
            message,
            slot,
            ticket,
            mailbox,
        } = job;
        let handled = TICKET.scope(ticket, handle(kind, &core, message));
        if AssertUnwindSafe(handled).catch_unwind().await.is_err() {
            tracing::error!("handling a message panicked; the bus will deliver it again");
        }
        {
            let mut idle = idle.lock().unwrap_or_else(|p| p.into_inner());
            let Some(idle) = idle.as_mut() else {
                // Draining: no more messages come.
                return;
            };
            idle.push(Idle {
                mailbox,
                since: Instant::now(),
            });
        }
        // Idle before the room is given back: the consumer, once it has the room,
        // finds this lane idle instead of starting another.
        drop(slot);
        job = match inbox.recv().await {
            Some(next) => next,
            // Let go: its mailbox was dropped.
            None => return,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::ConsumerSpec;
    use crate::engine::Engine;
    use tokio::sync::Semaphore;

    /// Messages that are not events: handling one terminates it at once.
    async fn messages(engine: &Engine, n: usize) -> Vec<Message> {
        let spec = ConsumerSpec::new("lanes", ["q.>"]);
        let mut sub = engine.bus().subscribe(&spec).await.unwrap();
        let mut out = Vec::new();
        for i in 0..n {
            let subject = format!("q.{i}");
            engine
                .bus()
                .publish(&subject, b"not an event".to_vec().into(), None)
                .await
                .unwrap();
            out.push(sub.next().await.unwrap());
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn lanes_are_reused_and_let_go_when_idle_too_long() {
        let engine = Engine::embedded();
        let core = Arc::new(Core::new(&engine, Duration::from_secs(30)));
        let room = Arc::new(Semaphore::new(2));
        let mut lanes = Lanes::new(core.clone(), Kind::Request);
        let mut messages = messages(&engine, 5).await.into_iter();
        let mut run = |lanes: &mut Lanes, room: &Arc<Semaphore>| {
            let slot = room.clone().try_acquire_owned().expect("room");
            lanes.run(messages.next().unwrap(), slot, Ticket::new(core.clone()));
        };
        // Two at once: two lanes.
        run(&mut lanes, &room);
        run(&mut lanes, &room);
        let idle = |room: &Arc<Semaphore>| {
            let room = room.clone();
            async move { drop(room.acquire_many(2).await.unwrap()) }
        };
        idle(&room).await;
        assert_eq!(lanes.tasks.len(), 2);
        // One after the other: the same lane again, none new.
        run(&mut lanes, &room);
        idle(&room).await;
        assert_eq!(lanes.tasks.len(), 2);
        // Past the idle limit, handing out a message lets the oldest idle lane go.
        tokio::time::advance(IDLE_FOR + Duration::from_secs(1)).await;
        run(&mut lanes, &room);
        idle(&room).await;
        run(&mut lanes, &room);
        idle(&room).await;
        assert_eq!(lanes.tasks.len(), 1);
        lanes.drain(Duration::from_secs(1)).await;
    }

    /// What the `Boxed:` comments in the handler buy: the state of one message's
    /// handling, which every lane holds for as long as it lives, stays small because
    /// the rare branches (approval requests and decisions, heartbeats) are boxed. It
    /// is 3,928 bytes in a test build; unboxing any of those three makes it 4,512 to
    /// 6,008, past this bound. If a change must grow it, raise the bound knowingly.
    #[tokio::test]
    async fn a_messages_handling_stays_small() {
        let engine = Engine::embedded();
        let core = Core::new(&engine, Duration::from_secs(30));
        let message = messages(&engine, 1).await.pop().unwrap();
        let handling = handle(Kind::Request, &core, message);
        let size = std::mem::size_of_val(&handling);
        println!("a message's handling: {size} bytes");
        assert!(size <= 4 * 1024, "a message's handling is {size} bytes");
    }
}

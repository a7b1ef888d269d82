//! Asking several nodes for the slot map without waiting on one that does not answer: one query
//! at first, another whenever the last one has gone unanswered for [`Asks::stagger`], failed, or
//! gave a map that settles nothing; the answers are taken in the order they arrive.
//!
//! A healthy cluster costs one query per refresh, as before. A frozen node (SIGSTOP, a long
//! fork) costs one stagger instead of the whole `refresh_timeout`: its query stays in flight
//! (bounded by that timeout) while the next node is asked.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use crate::cluster::Topology;

/// One query: the node asked and its map, or why there is none (the reason is logged).
pub(crate) type Answer = (String, Result<Topology, Missed>);

/// Why a query gave no map, as far as the refresh's summary line cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Missed {
    /// It failed at once: the connect was refused, the connection closed, or the reply was an
    /// error or unreadable.
    Failed,
    /// No reply within `refresh_timeout`.
    Late,
}

type Query<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// The nodes still to ask and the queries in flight.
pub(crate) struct Asks<'a> {
    /// Nodes not asked yet, in the order to ask them.
    queue: VecDeque<String>,
    /// Queries sent and not answered, polled together; answers are taken as they arrive.
    in_flight: FuturesUnordered<Query<'a>>,
    /// Starts the query of one node.
    ask: Box<dyn Fn(String) -> Query<'a> + Send + Sync + 'a>,
    /// How long a query may go unanswered before the next node is asked too.
    stagger: Duration,
    /// When the next node is asked even if no query failed.
    next_at: Instant,
    /// Nodes asked so far, in order.
    asked: Vec<String>,
    /// Nodes whose query failed (not merely late), in the order the failures came.
    failed: Vec<String>,
}

impl<'a> Asks<'a> {
    /// `candidates` in the order to ask them; `ask` queries one.
    pub(crate) fn new<F, Fut>(candidates: Vec<String>, stagger: Duration, ask: F) -> Asks<'a>
    where
        F: Fn(String) -> Fut + Send + Sync + 'a,
        Fut: Future<Output = Answer> + Send + 'a,
    {
        Asks {
            queue: candidates.into(),
            in_flight: FuturesUnordered::new(),
            ask: Box::new(move |addr| Box::pin(ask(addr))),
            stagger,
            next_at: Instant::now(),
            asked: Vec::new(),
            failed: Vec::new(),
        }
    }

    /// The next answer, asking more nodes as queries go unanswered; `None` once every candidate
    /// was asked and every query is over.
    pub(crate) async fn next(&mut self) -> Option<Answer> {
        loop {
            if self.in_flight.is_empty() && !self.launch() {
                return None;
            }
            let more = !self.queue.is_empty();
            tokio::select! {
                answer = self.in_flight.next() => {
                    if let Some((addr, Err(Missed::Failed))) = &answer {
                        self.failed.push(addr.clone());
                    }
                    return answer;
                }
                () = tokio::time::sleep_until(self.next_at), if more => {
                    self.launch();
                }
            }
        }
    }

    /// The last answer settled nothing (it failed, was stale or partial, or needs a second
    /// node's word): ask the next node now rather than after the stagger.
    pub(crate) fn hurry(&mut self) {
        self.launch();
    }

    /// Nodes asked so far, in order.
    pub(crate) fn asked(&self) -> &[String] {
        &self.asked
    }

    /// Nodes whose query failed so far (refused, closed, an error), not counting late ones.
    pub(crate) fn failed(&self) -> &[String] {
        &self.failed
    }

    fn launch(&mut self) -> bool {
        let Some(addr) = self.queue.pop_front() else {
            return false;
        };
        self.asked.push(addr.clone());
        self.in_flight.push((self.ask)(addr));
        self.next_at = Instant::now() + self.stagger;
        true
    }
}

//! A busy spell's part in moves between workers (`placement: auto`, see moving.rs): noticing
//! that its client pipelines, and deciding at a safe point whether to move.

use tokio::io::{AsyncRead, AsyncWrite};

use super::super::movable::Movable;
use super::super::moves::{PIPELINE_DEPTH, PIPELINE_READS};
use super::busy::Spell;

impl<'d, S> Spell<'_, 'd, S>
where
    S: Movable,
{
    /// Where this spell's session may move: with `placement: auto`, on a per-core worker, for
    /// sockets that can move.
    pub(super) fn find_moves(&mut self) {
        self.placement.moves = None;
        if !S::MOVABLE {
            return;
        }
        let downstream = self.c.downstream;
        let Some(moves) = downstream.spread().and_then(|spread| spread.moves()) else {
            return;
        };
        self.placement.moves = crate::workers::current().map(|worker| (moves, worker));
    }
}

impl<S> Spell<'_, '_, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    /// After a turn: the worker this session should move to now, if it is at a safe point and
    /// its worker wants to shed sessions (one relaxed load otherwise).
    pub(super) fn move_now(&mut self) -> Option<(usize, usize)> {
        let (moves, worker) = self.placement.moves?;
        if !moves.wanted(worker)
            || !self.replies.calls.is_empty()
            || self.parked.is_some()
            || self.reading.closing
            || !self.c.may_move()
        {
            return None;
        }
        if let Some(member) = self.placement.pipelining.as_mut() {
            if let Some(to) = moves.shed_pipelining(member) {
                return Some((worker, to));
            }
        }
        let to = moves.take_ticket(worker)?;
        if let Some(member) = self.placement.pipelining.as_mut() {
            moves.transfer(member, to); // its count goes with it
        }
        Some((worker, to))
    }

    /// Counts a turn that started `started` commands from one read: a run of
    /// [`PIPELINE_READS`] reads of [`PIPELINE_DEPTH`] commands or more makes the session a
    /// pipelining one; a read of fewer ends that.
    pub(super) fn note_depth(&mut self, started: usize) {
        let Some((moves, worker)) = self.placement.moves else {
            return;
        };
        if started == 0 {
            return;
        }
        if started < PIPELINE_DEPTH {
            self.placement.deep_reads = 0;
            self.placement.pipelining = None;
            return;
        }
        self.placement.deep_reads = self.placement.deep_reads.saturating_add(1);
        if self.placement.deep_reads >= PIPELINE_READS && self.placement.pipelining.is_none() {
            self.placement.pipelining = Some(moves.join_pipelining(worker));
        }
    }
}

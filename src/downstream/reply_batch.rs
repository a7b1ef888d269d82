//! When a client session writes the replies it has: the replies to the commands of one read go
//! out together, in one write, as Redis itself does.
//!
//! A pipeline spread over several nodes gets its replies from several node connections at
//! different moments; writing each as it comes costs the client one write (and one wake-up of
//! the client) per node. Redis answers everything it read from a client in one go; so does
//! redcar: the replies already here wait until the oldest read's last reply is in. They never
//! wait longer than that (a later read does not extend the wait), nor past `max_held` bytes, and
//! a lone command's reply is written as soon as it is here.

use std::collections::VecDeque;

#[derive(Default)]
pub(super) struct ReplyBatches {
    /// Calls queued over the session's life.
    queued: u64,
    /// Where each read's calls end (in `queued` numbering), oldest first, until written.
    ends: VecDeque<u64>,
    /// The last end recorded.
    last_end: u64,
    /// A write was cut short: what is left goes out before anything is held again.
    draining: bool,
}

impl ReplyBatches {
    /// One call joined the owed ones.
    #[inline]
    pub(crate) fn queued(&mut self) {
        self.queued += 1;
    }

    /// Every command of a read is queued: its replies are one batch.
    #[inline]
    pub(crate) fn end_of_read(&mut self) {
        if self.last_end < self.queued {
            self.last_end = self.queued;
            self.ends.push_back(self.queued);
        }
    }

    /// May the `buffered` reply bytes be written now, with `owed` calls still unanswered?
    #[inline]
    pub(crate) fn may_write(&self, owed: usize, buffered: usize, max_held: usize) -> bool {
        self.draining
            || buffered >= max_held
            || self
                .ends
                .front()
                .is_none_or(|&end| self.answered(owed) >= end)
    }

    /// A write took some of the buffered bytes; `left` are still to write.
    #[inline]
    pub(crate) fn wrote(&mut self, owed: usize, left: usize) {
        let answered = self.answered(owed);
        while self.ends.front().is_some_and(|&end| end <= answered) {
            self.ends.pop_front();
        }
        self.draining = left > 0;
    }

    fn answered(&self, owed: usize) -> u64 {
        self.queued.saturating_sub(owed as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::ReplyBatches;

    const MAX: usize = 64 * 1024;

    fn read(batches: &mut ReplyBatches, commands: usize) {
        for _ in 0..commands {
            batches.queued();
        }
        batches.end_of_read();
    }

    #[test]
    fn a_read_is_answered_in_one_write() {
        let mut b = ReplyBatches::default();
        read(&mut b, 3);
        assert!(!b.may_write(2, 10, MAX), "one reply of three is here");
        assert!(!b.may_write(1, 20, MAX), "two of three");
        assert!(b.may_write(0, 30, MAX), "all three");
    }

    #[test]
    fn a_lone_command_is_written_at_once() {
        let mut b = ReplyBatches::default();
        read(&mut b, 1);
        assert!(b.may_write(0, 5, MAX));
    }

    #[test]
    fn a_later_read_does_not_extend_the_wait() {
        let mut b = ReplyBatches::default();
        read(&mut b, 2);
        read(&mut b, 2);
        assert!(!b.may_write(3, 5, MAX));
        assert!(b.may_write(2, 10, MAX), "the first read is answered");
        b.wrote(2, 0);
        assert!(
            !b.may_write(1, 5, MAX),
            "the second waits for its own last reply"
        );
        assert!(b.may_write(0, 10, MAX));
    }

    #[test]
    fn a_read_with_nothing_new_starts_no_batch() {
        let mut b = ReplyBatches::default();
        read(&mut b, 2);
        b.wrote(0, 0);
        b.end_of_read();
        read(&mut b, 2);
        assert!(
            !b.may_write(1, 5, MAX),
            "the new read waits for its own replies"
        );
    }

    #[test]
    fn big_replies_are_not_held() {
        let mut b = ReplyBatches::default();
        read(&mut b, 2);
        assert!(b.may_write(1, MAX, MAX));
    }

    #[test]
    fn a_cut_short_write_is_finished_first() {
        let mut b = ReplyBatches::default();
        read(&mut b, 1);
        b.wrote(0, 100);
        read(&mut b, 2);
        assert!(b.may_write(2, 100, MAX), "the rest of the first write");
        b.wrote(2, 0);
        assert!(!b.may_write(2, 1, MAX));
    }

    #[test]
    fn replies_made_without_a_call_are_written_at_once() {
        let b = ReplyBatches::default();
        assert!(b.may_write(0, 10, MAX));
    }
}

//! Commands bound to the client's connection rather than to one request: transactions (MULTI …
//! EXEC, sent as one unit on the client's shared connection), WATCH and blocking commands (on a
//! dedicated connection), and WAIT (over the writes the client's connection carried).

mod dedicated;
mod transaction;
mod wait;

pub(crate) use dedicated::Watch;
pub(crate) use transaction::transaction_payload;
pub(crate) use wait::Written;

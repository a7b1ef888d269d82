//! Value types every layer may use: durations and sizes as written in the config, secrets
//! (redacted when printed, digested for comparison) and PEM loading. A leaf: it imports
//! nothing from the rest of the crate, so `config` can stay at the edge (only `app` and `main`
//! import it) while each module parses its own settings with these.
#![warn(unreachable_pub, missing_docs)]

pub(crate) mod pem;
pub(crate) mod secret;
pub(crate) mod units;

//! Integration tests (one test binary) against real redis-server processes.
//! Registered in Cargo.toml as `[[test]] name = "it", path = "tests/it/main.rs"`.

mod support;

mod admin;
mod blocking;
mod cli;
mod clients;
mod connections;
mod coverage;
mod differential;
mod doctor;
mod economy;
mod fanout;
mod harness;
mod isolation;
mod multikey;
mod proxy;
mod pubsub;
mod redirects;
mod topology;
mod transactions;

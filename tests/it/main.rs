//! Integration tests (one test binary) against real redis-server processes.
//! Registered in Cargo.toml as `[[test]] name = "it", path = "tests/it/main.rs"`.

mod support;

mod admin;
mod admin_auth;
mod auth;
mod backlog;
mod blocking;
mod cli;
mod clients;
mod connections;
mod convert_envoy;
mod coverage;
mod deploy;
mod differential;
mod doctor;
mod economy;
mod facade;
mod fanout;
mod harness;
mod hostile;
mod idle;
mod isolation;
mod multikey;
mod node_admin;
mod observability_examples;
mod outlier;
mod proxy;
mod pubsub;
mod redirects;
mod reload;
mod resilience;
mod resp3;
mod routes;
mod secrets;
mod sentinel;
mod standby;
mod status_page;
mod threading;
mod tls;
mod topology;
mod transactions;
mod upstream_auth;
mod upstream_tls;

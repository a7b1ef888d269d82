//! Integration tests (one test binary) against real redis-server processes.
//! Registered in Cargo.toml as `[[test]] name = "it", path = "tests/it/main.rs"`.

mod support;

mod cli;
mod harness;
mod isolation;
mod proxy;
mod redirects;

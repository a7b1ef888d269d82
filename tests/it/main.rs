//! Integration tests (one test binary). Registered in Cargo.toml as
//! `[[test]] name = "it", path = "tests/it/main.rs"`.

mod support;

mod harness;

//! Module-level tests: the generated docs stay current.

#[test]
fn docs_commands_md_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/commands.md");
    let rendered = super::docs::render_markdown();
    if std::env::var_os("REDCAR_BLESS").is_some() {
        std::fs::write(path, &rendered).expect("write docs/commands.md");
        return;
    }
    let current = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        current == rendered,
        "docs/commands.md is stale; regenerate with REDCAR_BLESS=1 cargo test -p redcar-protocol --lib commands::"
    );
}

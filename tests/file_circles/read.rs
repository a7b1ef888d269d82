//! Reading a file's text for tests/file_circles.rs: its non-test part with comments and
//! strings blanked, its `use` statements spread into paths, and the paths written inline.

use std::collections::BTreeSet;

/// The non-test part of a file: a `#[cfg(test)]` inline module ends it; a `#[cfg(test)]`
/// `mod x;` or single-line `use` is dropped.
pub(super) fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "#[cfg(test)]" {
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim().starts_with("#[") {
                j += 1;
            }
            let next = lines.get(j).map_or("", |l| l.trim());
            let item = next
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            if item.starts_with("mod ") && next.ends_with('{') {
                return out;
            }
            if (item.starts_with("mod ") || item.starts_with("use ")) && next.ends_with(';') {
                i = j + 1;
                continue;
            }
        }
        out.push_str(lines[i]);
        i += 1;
    }
    out
}

/// `code` with comments and the insides of string and char literals replaced by spaces
/// (newlines kept).
pub(super) fn blank(code: &str) -> String {
    let c: Vec<char> = code.chars().collect();
    let mut out: Vec<char> = Vec::with_capacity(c.len());
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    let keep = |out: &mut Vec<char>, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        let at = |k: usize| c.get(i + k).copied().unwrap_or('\0');
        if at(0) == '/' && at(1) == '/' {
            while i < c.len() && c[i] != '\n' {
                keep(&mut out, c[i]);
                i += 1;
            }
        } else if at(0) == '/' && at(1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.extend([' ', ' ']);
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                    continue;
                }
                keep(&mut out, c[i]);
                i += 1;
            }
        } else if at(0) == 'r' && (at(1) == '"' || at(1) == '#') && (i == 0 || !ident(c[i - 1])) {
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            if c.get(i + 1 + hashes) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            out.push('"');
            i += hashes + 2;
            while i < c.len() {
                if c[i] == '"'
                    && c[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    i += hashes + 1;
                    break;
                }
                keep(&mut out, c[i]);
                i += 1;
            }
            out.push('"');
        } else if at(0) == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                let len = if c[i] == '\\' { 2 } else { 1 };
                for k in 0..len {
                    keep(&mut out, c.get(i + k).copied().unwrap_or(' '));
                }
                i += len;
            }
            out.push('"');
            i += 1;
        } else if at(0) == '\'' && (at(1) == '\\' || (at(2) == '\'' && at(1) != '\'')) {
            out.push('\'');
            i += 1;
            while i < c.len() && c[i] != '\'' {
                let len = if c[i] == '\\' { 2 } else { 1 };
                out.extend(std::iter::repeat_n(' ', len));
                i += len;
            }
            out.push('\'');
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// The paths of a `use` tree (`a::{b, c::{self, D as E}}`), each with the name it binds.
pub(super) fn spread(tree: &str) -> Vec<(Vec<String>, String)> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    for ch in tree.chars() {
        if ch.is_alphanumeric() || ch == '_' || ch == '$' {
            word.push(ch);
            continue;
        }
        if !word.is_empty() {
            tokens.push(std::mem::take(&mut word));
        }
        if "{},*".contains(ch) {
            tokens.push(ch.to_string());
        }
    }
    if !word.is_empty() {
        tokens.push(word);
    }
    let mut out = Vec::new();
    let mut at = 0;
    spread_tree(&tokens, &mut at, Vec::new(), &mut out);
    out
}

pub(super) fn spread_tree(
    t: &[String],
    at: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) {
    let mut path = prefix;
    while *at < t.len() {
        match t[*at].as_str() {
            "{" => {
                *at += 1;
                while *at < t.len() && t[*at] != "}" {
                    spread_tree(t, at, path.clone(), out);
                    if *at < t.len() && t[*at] == "," {
                        *at += 1;
                    }
                }
                *at += 1;
                return;
            }
            "," | "}" => break,
            "*" => {
                *at += 1;
                out.push((path, "*".to_string()));
                return;
            }
            "as" => {
                *at += 1;
                let alias = t.get(*at).cloned().unwrap_or_default();
                *at += 1;
                out.push((path, alias));
                return;
            }
            "self" if !path.is_empty() => *at += 1,
            word => {
                path.push(word.to_string());
                *at += 1;
            }
        }
    }
    if let Some(last) = path.last().cloned() {
        out.push((path, last));
    }
}

/// A file's `use` statements: each path, the name it binds, and whether it is a re-export
/// (any `pub`).
pub(super) struct Use {
    pub(super) path: Vec<String>,
    pub(super) name: String,
    pub(super) public: bool,
}

/// `code` (blanked) split into its `use` statements and the rest (the statements blanked).
pub(super) fn uses_of(code: &str) -> (Vec<Use>, String) {
    let mut uses = Vec::new();
    let mut rest = code.to_string();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(found) = code[from..].find("use ") {
        let at = from + found;
        from = at + 4;
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let Some(len) = code[at..].find(';') else {
            break;
        };
        let start = code[..at].rfind([';', '{', '}', ']']).map_or(0, |s| s + 1);
        let public = code[start..at].contains("pub");
        for (path, name) in spread(&code[at + 4..at + len]) {
            uses.push(Use { path, name, public });
        }
        rest.replace_range(at..at + len, &" ".repeat(len));
    }
    (uses, rest)
}

/// Inline paths in `code` that start with `crate`, `super`, `self` or one of `starts`.
pub(super) fn inline_paths(code: &str, starts: &BTreeSet<String>) -> Vec<Vec<String>> {
    let c: Vec<char> = code.chars().collect();
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if !ident(c[i]) || (i > 0 && (ident(c[i - 1]) || c[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let mut path = Vec::new();
        let mut j = i;
        loop {
            let end = (j..c.len()).find(|&k| !ident(c[k])).unwrap_or(c.len());
            path.push(c[j..end].iter().collect::<String>());
            j = end;
            if c.get(j) == Some(&':')
                && c.get(j + 1) == Some(&':')
                && c.get(j + 2).is_some_and(|&ch| ident(ch))
            {
                j += 2;
            } else {
                break;
            }
        }
        let before: String = c[i.saturating_sub(4)..i].iter().collect();
        let first = path[0].as_str();
        let known = ["crate", "super", "self"].contains(&first) || starts.contains(first);
        if path.len() > 1 && known && !before.ends_with("(in ") {
            out.push(path);
        }
        i = j;
    }
    out
}

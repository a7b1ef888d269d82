//! Client and node passwords: `downstream_auth_*` → `auth.*`, the cluster's `RedisProtocolOptions`
//! → `upstream.username`/`password`. Client auth that cannot be carried over stops the
//! conversion: the result would accept clients Envoy refused. Warnings name where a secret is,
//! never its value.
//!
//! | Envoy | redcar key |
//! | --- | --- |
//! | `downstream_auth_password`, or the first of `downstream_auth_passwords` | `auth.requirepass` |
//! | the same with `downstream_auth_username` | `auth.users[0]` (`name`, `password`) |
//! | cluster `RedisProtocolOptions.auth_password` | `upstream.password` (clear if inline) |
//! | cluster `RedisProtocolOptions.auth_username` | `upstream.username` (read now if not inline) |
//!
//! A password from a file or a variable keeps that shape (`{file: PATH}`, `{env: NAME}`), so redcar
//! reads it at start as Envoy did; see docs/security.md for how redcar checks it.

use yaml_serde::{Mapping, Value};

use super::draft::Draft;
use super::source::{data_source, describe, plain_name, secret, DataSource};
use super::ConvertError;

/// `downstream_auth_password(s)` and `downstream_auth_username` → `auth.requirepass` or
/// `auth.users[0]`.
/// Only the first of several passwords is kept (a redcar user has one), with a note. A username
/// read from a file or variable is read now, since redcar takes names in clear. Fails on
/// `external_auth_provider` and on a username without a password: either way the result would let
/// in clients Envoy refused.
pub(super) fn downstream(proxy: &Value, draft: &mut Draft) -> Result<(), ConvertError> {
    if !proxy["external_auth_provider"].is_null() {
        return Err(ConvertError(
            "external_auth_provider is not supported: redcar checks passwords itself \
             (auth.requirepass, auth.users)"
                .to_owned(),
        ));
    }
    let mut passwords = Vec::new();
    if !proxy["downstream_auth_password"].is_null() {
        passwords.push(data_source(
            &proxy["downstream_auth_password"],
            "downstream_auth_password",
        )?);
    }
    for (i, value) in proxy["downstream_auth_passwords"]
        .as_sequence()
        .into_iter()
        .flatten()
        .enumerate()
    {
        passwords.push(data_source(
            value,
            &format!("downstream_auth_passwords[{i}]"),
        )?);
    }
    let username = &proxy["downstream_auth_username"];
    let Some(first) = passwords.first() else {
        if username.is_null() {
            return Ok(());
        }
        return Err(ConvertError(
            "downstream_auth_username without a downstream_auth_password".to_owned(),
        ));
    };
    if passwords.len() > 1 {
        draft.note(
            "auth",
            format!(
                "downstream_auth_passwords: only the first of {} kept; a redcar user has one \
                 password, so clients using the others get WRONGPASS",
                passwords.len()
            ),
        );
    }
    note_inline(first, "downstream auth password", true, draft);
    let password = secret(first, true);
    if username.is_null() {
        draft.set(&["auth", "requirepass"], password);
        return Ok(());
    }
    let source = data_source(username, "downstream_auth_username")?;
    let name = plain_name(&source, "downstream_auth_username")?;
    if !matches!(source, DataSource::Inline(_)) {
        draft.note(
            "auth",
            format!(
                "downstream_auth_username: read from {} now; redcar takes user names in clear",
                describe(&source)
            ),
        );
    }
    let mut user = Mapping::new();
    user.insert("name".into(), name.into());
    user.insert("password".into(), password);
    draft.set(
        &["auth", "users"],
        Value::Sequence(vec![Value::Mapping(user)]),
    );
    Ok(())
}

/// The cluster's `typed_extension_protocol_options` for the redis_proxy filter.
/// An inline node password is written in clear (redcar must send it), with a note; per-node
/// `credentials` and `aws_iam` are only noted. Fails only on a malformed `DataSource`.
pub(super) fn upstream(cluster: &Value, draft: &mut Draft) -> Result<(), ConvertError> {
    for field in [
        "typed_extension_protocol_options",
        "extension_protocol_options",
    ] {
        draft.note_unknown(
            "upstream",
            &cluster[field],
            &["envoy.filters.network.redis_proxy"],
            &format!("cluster {field} "),
        );
    }
    let holder = [
        "typed_extension_protocol_options",
        "extension_protocol_options",
    ]
    .iter()
    .map(|field| &cluster[*field]["envoy.filters.network.redis_proxy"])
    .find(|v| !v.is_null());
    let Some(holder) = holder else {
        return Ok(());
    };
    // The entry is an `Any`: the message itself next to its `@type`, or a `Struct`'s `value`.
    let options = if holder["value"].is_mapping() {
        &holder["value"]
    } else {
        holder
    };
    draft.note_unknown(
        "upstream",
        options,
        &[
            "@type",
            "auth_password",
            "auth_username",
            "credentials",
            "aws_iam",
        ],
        "RedisProtocolOptions ",
    );
    if !options["auth_password"].is_null() {
        let source = data_source(&options["auth_password"], "auth_password")?;
        note_inline(&source, "cluster auth_password", false, draft);
        draft.set(&["upstream", "password"], secret(&source, false));
    }
    if !options["auth_username"].is_null() {
        let source = data_source(&options["auth_username"], "auth_username")?;
        draft.set(
            &["upstream", "username"],
            plain_name(&source, "auth_username")?,
        );
    }
    if !options["credentials"].is_null() {
        draft.note(
            "upstream",
            "credentials (per-node passwords): not converted; redcar uses one username and \
             password for every node",
        );
    }
    if !options["aws_iam"].is_null() {
        draft.note(
            "upstream",
            "aws_iam: not converted; redcar authenticates with upstream.username/password only",
        );
    }
    Ok(())
}

/// An inline secret: say so (without the value), and how the output keeps it.
fn note_inline(source: &DataSource, what: &str, digest: bool, draft: &mut Draft) {
    if !matches!(source, DataSource::Inline(_)) {
        return;
    }
    let (section, kept) = if digest {
        ("auth", "written as its SHA-256 digest")
    } else {
        ("upstream", "written in clear, as redcar must send it")
    };
    draft.note(
        section,
        format!(
            "{what}: inline_string in the Envoy file, {kept}; prefer {{file: PATH}} or \
             {{env: NAME}}"
        ),
    );
}

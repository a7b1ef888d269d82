//! Fetching `/metrics` with a minimal HTTP/1.1 GET and parsing the Prometheus text exposition
//! format (and its OpenMetrics flavour) into flat samples.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Upper bound on a `/metrics` response; a body larger than this is refused, not buffered.
const MAX_RESPONSE: usize = 32 << 20;

/// One line of the exposition: `name{label="value",...} value`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) value: f64,
}

impl Sample {
    /// The value of label `key`, if present.
    pub(crate) fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a scrape failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScrapeError {
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Http(String),
    /// `401`: the admin API wants `admin.token` (none or a wrong one was sent).
    #[error("the server answered 401 Unauthorized: the admin token is missing or wrong")]
    Unauthorized,
}

/// `127.0.0.1:9190`, `http://127.0.0.1:9190/` → `127.0.0.1:9190`.
pub(crate) fn host_port(admin: &str) -> &str {
    let admin = admin.trim();
    let admin = admin.strip_prefix("http://").unwrap_or(admin);
    admin.split('/').next().unwrap_or(admin)
}

/// `GET http://{addr}/metrics` (with `Authorization: Bearer <token>` when given), the whole
/// exchange bounded by `limit`; returns the body.
pub(crate) async fn fetch_metrics(
    addr: &str,
    token: Option<&str>,
    limit: Duration,
) -> Result<String, ScrapeError> {
    match timeout(limit, get(addr, "/metrics", token)).await {
        Ok(result) => result,
        Err(_) => Err(ScrapeError::Timeout(limit)),
    }
}

/// `GET http://{addr}{path}`, bounded by `limit` like [`fetch_metrics`].
pub(crate) async fn get_with_timeout(
    addr: &str,
    path: &str,
    token: Option<&str>,
    limit: Duration,
) -> Result<String, ScrapeError> {
    match timeout(limit, get(addr, path, token)).await {
        Ok(result) => result,
        Err(_) => Err(ScrapeError::Timeout(limit)),
    }
}

async fn get(addr: &str, path: &str, token: Option<&str>) -> Result<String, ScrapeError> {
    let mut stream = TcpStream::connect(addr).await?;
    let authorization = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: redcar-top\r\n\
         Accept: text/plain\r\n{authorization}Connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::with_capacity(64 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        if raw.len() + n > MAX_RESPONSE {
            return Err(ScrapeError::Http(format!(
                "response larger than {MAX_RESPONSE} bytes"
            )));
        }
        raw.extend_from_slice(&chunk[..n]);
    }
    parse_response(&raw)
}

/// Splits an HTTP/1.1 response into status and body; `200` bodies are returned as text.
fn parse_response(raw: &[u8]) -> Result<String, ScrapeError> {
    let bad = |why: &str| ScrapeError::Http(why.to_string());
    let head_end =
        memchr::memmem::find(raw, b"\r\n\r\n").ok_or_else(|| bad("incomplete response"))?;
    let head =
        std::str::from_utf8(&raw[..head_end]).map_err(|_| bad("response head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line.split_whitespace().nth(1).unwrap_or_default();
    if !status_line.starts_with("HTTP/") || status.len() != 3 {
        return Err(bad("not an HTTP response"));
    }
    if status == "401" {
        return Err(ScrapeError::Unauthorized);
    }
    if status != "200" {
        return Err(ScrapeError::Http(format!(
            "the server answered `{}`",
            status_line.trim()
        )));
    }
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
        if key == "transfer-encoding" && value.to_ascii_lowercase().contains("chunked") {
            chunked = true;
        } else if key == "content-length" {
            length = value.parse::<usize>().ok();
        }
    }
    let body = &raw[head_end + 4..];
    let body = if chunked {
        dechunk(body).ok_or_else(|| bad("malformed chunked body"))?
    } else {
        body[..length.unwrap_or(body.len()).min(body.len())].to_vec()
    };
    String::from_utf8(body).map_err(|_| bad("body is not UTF-8"))
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len());
    loop {
        let line_end = memchr::memmem::find(body, b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

/// Parses a whole exposition. Comments, `# EOF` and lines that do not parse are skipped: an
/// operator's view should survive a metric it does not understand.
pub(crate) fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line == "# EOF" {
            break;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Ok(sample) = parse_line(line) {
            samples.push(sample);
        }
    }
    samples
}

/// Parses one sample line; a trailing timestamp and an OpenMetrics exemplar are ignored.
pub(crate) fn parse_line(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or_else(|| format!("no value in `{line}`"))?;
    let name = &line[..name_end];
    let valid_name = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    if name.is_empty() || !name.chars().all(valid_name) {
        return Err(format!("bad metric name in `{line}`"));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        let (parsed, remaining) = parse_labels(after_brace)?;
        labels = parsed;
        rest = remaining;
    }
    let value_text = rest
        .split_whitespace()
        .next()
        .ok_or_else(|| format!("no value in `{line}`"))?;
    let value = value_text
        .parse::<f64>()
        .map_err(|_| format!("bad value `{value_text}` in `{line}`"))?;
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

type Labels = Vec<(String, String)>;

/// Parses `key="value",...}` (the opening brace already consumed); returns the labels and the
/// text after the closing brace.
fn parse_labels(mut text: &str) -> Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    loop {
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix('}') {
            return Ok((labels, rest));
        }
        let eq = text.find('=').ok_or("label without `=`")?;
        let key = text[..eq].trim().to_string();
        let quoted = text[eq + 1..].trim_start();
        let quoted = quoted.strip_prefix('"').ok_or("label value not quoted")?;
        let (value, rest) = unescape_until_quote(quoted)?;
        labels.push((key, value));
        text = rest.trim_start();
        text = text.strip_prefix(',').unwrap_or(text);
    }
}

/// Reads a label value up to its closing quote, undoing `\\`, `\"` and `\n`.
fn unescape_until_quote(text: &str) -> Result<(String, &str), String> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &text[i + 1..])),
            '\\' => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, other)) => value.push(other),
                None => break,
            },
            other => value.push(other),
        }
    }
    Err("unterminated label value".to_string())
}

#[cfg(test)]
#[path = "scrape_tests.rs"]
mod tests;

//! Fetching `/metrics` with hyper's HTTP/1.1 client and parsing the Prometheus text exposition
//! format (and its OpenMetrics flavour) into flat samples. The parser is our own: no crate in
//! the tree reads the format (prometheus-client only writes it), and `top` needs only the flat
//! samples, not types or metadata.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::ext::ReasonPhrase;
use hyper::{header, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Upper bound on a `/metrics` response; a body larger than this is refused, not buffered.
const MAX_RESPONSE: usize = 32 << 20;

/// One line of the exposition: `name{label="value",...} value`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sample {
    /// The series name, `redcar_` prefix included.
    pub(crate) name: String,
    /// Label pairs in the order the exposition lists them.
    pub(crate) labels: Vec<(String, String)>,
    /// The sample's value; counters and gauges alike.
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
    /// No complete answer within the refresh interval.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// Connecting, reading or writing failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not a usable HTTP answer: the request could not be made, the status was not 200 or
    /// 401, or the body was too large or not UTF-8.
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

/// One `GET` on a fresh connection, through hyper's HTTP/1.1 client: the connection is driven
/// here, not in a spawned task, so a timeout that drops this future closes the socket too.
async fn get(addr: &str, path: &str, token: Option<&str>) -> Result<String, ScrapeError> {
    let stream = TcpStream::connect(addr).await?;
    // Title-case header names (`Authorization`, not `authorization`), as curl sends them.
    let (mut sender, connection) = http1::Builder::new()
        .title_case_headers(true)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(http_error)?;
    let mut request = Request::get(path)
        .header(header::HOST, addr)
        .header(header::USER_AGENT, "redcar-top")
        .header(header::ACCEPT, "text/plain");
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|e| ScrapeError::Http(format!("cannot build the request: {e}")))?;
    let exchange = async move {
        let response = sender.send_request(request).await.map_err(http_error)?;
        body_text(response).await
    };
    let mut exchange = std::pin::pin!(exchange);
    let mut connection = std::pin::pin!(connection);
    // The connection ending, cleanly or not, leaves the answer to the exchange (it fails if the
    // response did not arrive whole); the connection's own error says better what went wrong.
    let mut connection_error = None;
    let mut connection_done = false;
    loop {
        tokio::select! {
            result = &mut exchange => {
                return result.map_err(|e| connection_error.map_or(e, http_error));
            }
            result = &mut connection, if !connection_done => {
                connection_done = true;
                connection_error = result.err();
            }
        }
    }
}

/// A `200`'s body as text, at most [`MAX_RESPONSE`] bytes; any other status is an error.
async fn body_text(response: Response<Incoming>) -> Result<String, ScrapeError> {
    let status = response.status();
    if status == StatusCode::UNAUTHORIZED {
        return Err(ScrapeError::Unauthorized);
    }
    if status != StatusCode::OK {
        // The server's own reason phrase when it sent an unusual one, else the standard one.
        let reason = match response.extensions().get::<ReasonPhrase>() {
            Some(reason) => String::from_utf8_lossy(reason.as_bytes()).into_owned(),
            None => status.canonical_reason().unwrap_or_default().to_string(),
        };
        return Err(ScrapeError::Http(format!(
            "the server answered `{:?} {} {reason}`",
            response.version(),
            status.as_u16()
        )));
    }
    let body = Limited::new(response.into_body(), MAX_RESPONSE)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<LengthLimitError>() {
                ScrapeError::Http(format!("response larger than {MAX_RESPONSE} bytes"))
            } else {
                ScrapeError::Http(e.to_string())
            }
        })?
        .to_bytes();
    String::from_utf8(body.to_vec()).map_err(|_| ScrapeError::Http("body is not UTF-8".into()))
}

fn http_error(error: hyper::Error) -> ScrapeError {
    ScrapeError::Http(error.to_string())
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

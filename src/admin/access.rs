//! Bearer-token access to the admin API (`admin.token`): with a token set, every endpoint except
//! `/healthz` and `/readyz` needs `Authorization: Bearer <token>`, else `401` with
//! `WWW-Authenticate: Bearer`. The token is kept only as its SHA-256 and compared in constant time.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::values::secret::PasswordDigest;

/// The body of a refusal: says what to send, never what was sent.
const REFUSED: &str = "redcar: the admin API needs `Authorization: Bearer <admin.token>`\n";

/// Middleware for the protected routes: runs the handler only for the right token.
/// A wrong token is answered with `error="invalid_token"` in the challenge, a missing one without,
/// as RFC 6750 asks; the body never echoes what was sent.
pub(crate) async fn require(
    State(token): State<PasswordDigest>,
    request: Request,
    next: Next,
) -> Response {
    if authorized(request.headers(), &token) {
        return next.run(request).await;
    }
    let challenge = if request.headers().contains_key(header::AUTHORIZATION) {
        r#"Bearer realm="redcar", error="invalid_token""#
    } else {
        r#"Bearer realm="redcar""#
    };
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        REFUSED,
    )
        .into_response()
}

/// True when `headers` carry `Authorization: Bearer <token>` (scheme in any case) with the
/// token whose digest is `token`.
/// Extra spaces around the token are ignored; anything but the `Bearer` scheme is refused, so a
/// browser's Basic credentials never pass.
fn authorized(headers: &HeaderMap, token: &PasswordDigest) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let Some((scheme, credentials)) = value
        .iter()
        .position(|&b| b == b' ')
        .map(|space| value.split_at(space))
    else {
        return false;
    };
    scheme.eq_ignore_ascii_case(b"bearer") && token.matches(credentials.trim_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = HeaderValue::from_str(authorization).expect("header value");
        headers.insert(header::AUTHORIZATION, value);
        headers
    }

    #[test]
    fn only_the_bearer_token_itself_is_let_through() {
        let token = PasswordDigest::of(b"t0ken");
        assert!(authorized(&with("Bearer t0ken"), &token));
        assert!(authorized(&with("bearer t0ken"), &token));
        assert!(authorized(&with("Bearer  t0ken "), &token));
        assert!(!authorized(&HeaderMap::new(), &token));
        assert!(!authorized(&with("Bearer t0ke"), &token));
        assert!(!authorized(&with("Bearer t0kenx"), &token));
        assert!(!authorized(&with("Bearer"), &token));
        assert!(!authorized(&with("Bearer "), &token));
        assert!(!authorized(&with("Basic dDBrZW4="), &token));
        assert!(!authorized(&with("t0ken"), &token));
    }
}

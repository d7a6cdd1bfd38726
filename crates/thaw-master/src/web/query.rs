//! The dashboard's one query parameter, `path`, checked strictly (a malformed
//! query is a clear 400, never a guess), and the links that carry it.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use thaw_common::path;

use super::WebError;

/// Escaped in a path put into a query: all but unreserved characters and '/'.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'/').remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// `/files?path=P`, a directory's page.
pub fn files_href(p: &str) -> String {
    format!("/files?path={}", utf8_percent_encode(p, QUERY_VALUE))
}

/// `/file?path=P`, a file's page.
pub fn file_href(p: &str) -> String {
    format!("/file?path={}", utf8_percent_encode(p, QUERY_VALUE))
}

/// One query component, form-decoded ('+' is a space); invalid UTF-8 is refused.
fn decode(s: &str) -> Result<String, WebError> {
    let s = s.replace('+', " ");
    percent_decode_str(&s)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| WebError::BadRequest("the query is not UTF-8 once percent-decoded".to_string()))
}

/// The normalised `path` of a query (`None` if absent). Other parameters, a
/// repeated `path`, or a path that is not absolute or steps outside its
/// directory ('..') are refused.
pub fn path(raw: Option<&str>) -> Result<Option<String>, WebError> {
    let mut found = None;
    for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = decode(k)?;
        if k != "path" {
            return Err(WebError::BadRequest(format!("unknown query parameter {k:?}: the only one is path")));
        }
        if found.is_some() {
            return Err(WebError::BadRequest("path is given twice".to_string()));
        }
        found = Some(decode(v)?);
    }
    found.map(|p| path::normalize(&p).map_err(|e| WebError::BadRequest(format!("bad path: {}", e.message)))).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(q: &str) -> String {
        match path(Some(q)) {
            Err(WebError::BadRequest(m)) => m,
            other => panic!("{q:?}: expected a bad request, got {other:?}"),
        }
    }

    #[test]
    fn decodes_and_normalises() {
        assert_eq!(path(None).unwrap(), None);
        assert_eq!(path(Some("")).unwrap(), None);
        assert_eq!(path(Some("path=%2Fa%2F%2Fb%2F")).unwrap().as_deref(), Some("/a/b"));
        assert_eq!(path(Some("path=/a+b/%3Cscript%3E")).unwrap().as_deref(), Some("/a b/<script>"));
        assert_eq!(path(Some("path=/x&")).unwrap().as_deref(), Some("/x"));
    }

    #[test]
    fn refuses_traversal_and_malformed_queries() {
        assert!(bad("path=/a/../etc").contains("step outside"));
        assert!(bad("path=%2E%2E").contains("not absolute"));
        assert!(bad("path=/a/%2E%2E/b").contains("step outside"));
        assert!(bad("path=relative").contains("not absolute"));
        assert!(bad("path=").contains("not absolute"));
        assert!(bad("path=/%FF").contains("UTF-8"));
        assert!(bad("path=/a&path=/b").contains("twice"));
        assert!(bad("dir=/a").contains("unknown query parameter"));
        assert!(bad("path=/a%00b").contains("NUL"));
    }

    #[test]
    fn links_round_trip() {
        for p in ["/", "/a b/c", "/<script>alert(1)<", "/a&b \"q\" 'x'/%+#?", "/日本"] {
            let href = file_href(p);
            let q = href.split_once('?').unwrap().1;
            assert!(!q[5..].contains(['<', '>', '"', '\'', '&', ' ', '#', '+', '?']), "{href}");
            assert_eq!(path(Some(q)).unwrap().as_deref(), Some(p), "{href}");
        }
    }
}

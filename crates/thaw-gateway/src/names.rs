//! How S3 names map onto Thaw's namespace: a bucket is a top-level
//! directory, an object key a path under it (`s3://b/x/y.csv` is
//! `/b/x/y.csv`), a key ending in `/` an (empty) directory.
//!
//! Thaw's namespace is a tree, S3's a flat map of keys; the keys a tree
//! cannot hold are refused with S3's `InvalidArgument`, never stored under
//! another name: an empty component (`a//b`), `.` or `..` (which would
//! name another path: `..` or an encoded `%2F..%2F` is how a request would
//! escape its bucket), NUL, and keys over S3's 1024 bytes.

use s3s::{S3Error, S3ErrorCode};

/// S3's longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// The staging directory of uploads in progress: not a bucket (a bucket name
/// cannot start with `.`), so no listing shows it.
pub const STAGING: &str = "/.thaw-gateway";

/// The Thaw path of a bucket.
pub fn bucket_path(bucket: &str) -> String {
    format!("/{bucket}")
}

/// A checked key: its Thaw path and whether it names a directory (a key
/// ending in `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectPath {
    pub path: String,
    pub dir: bool,
}

/// The Thaw path of `key` in `bucket`, or S3's `InvalidArgument` saying why
/// the key has no place in a tree.
pub fn object_path(bucket: &str, key: &str) -> Result<ObjectPath, S3Error> {
    let invalid = |why: &str| S3Error::with_message(S3ErrorCode::InvalidArgument, format!("key {key:?}: {why}"));
    if key.is_empty() {
        return Err(invalid("empty"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(S3Error::with_message(
            S3ErrorCode::KeyTooLongError,
            format!("a key is at most {MAX_KEY_BYTES} bytes (this one is {})", key.len()),
        ));
    }
    if key.contains('\0') {
        return Err(invalid("contains NUL"));
    }
    let dir = key.ends_with('/');
    let body = if dir { &key[..key.len() - 1] } else { key };
    for part in body.split('/') {
        match part {
            "" => return Err(invalid("an empty path component (a leading '/' or '//'): Thaw's namespace is a tree")),
            "." | ".." => return Err(invalid("a '.' or '..' component would name another path")),
            _ => {}
        }
    }
    Ok(ObjectPath { path: format!("/{bucket}/{body}"), dir })
}

/// The S3 key of a Thaw path under `bucket` (`dir`: a directory, its key
/// ending in `/`).
pub fn key_of(bucket: &str, path: &str, dir: bool) -> Option<String> {
    let rest = path.strip_prefix('/')?.strip_prefix(bucket)?.strip_prefix('/')?;
    Some(if dir { format!("{rest}/") } else { rest.to_string() })
}

/// Percent-encodes a key for a listing asked with `encoding-type=url`: every
/// byte but unreserved characters and `/` (clients decode `+` as a space,
/// so it is encoded too).
pub fn url_encode(s: &str) -> String {
    const SET: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~').remove(b'/');
    percent_encoding::utf8_percent_encode(s, SET).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_paths_under_their_bucket() {
        assert_eq!(object_path("b", "x/y.csv").unwrap(), ObjectPath { path: "/b/x/y.csv".into(), dir: false });
        assert_eq!(object_path("b", "x/").unwrap(), ObjectPath { path: "/b/x".into(), dir: true });
        assert_eq!(object_path("b", "a b/ü %2F+").unwrap().path, "/b/a b/ü %2F+");
        assert_eq!(key_of("b", "/b/x/y.csv", false).as_deref(), Some("x/y.csv"));
        assert_eq!(key_of("b", "/b/x", true).as_deref(), Some("x/"));
        assert_eq!(key_of("b", "/bb/x", false), None);
    }

    #[test]
    fn keys_a_tree_cannot_hold_are_refused() {
        for bad in ["", "/x", "a//b", "a/./b", "a/../../etc/passwd", "..", "x/..", "a\0b", "//"] {
            let e = object_path("b", bad).unwrap_err();
            assert_eq!(*e.code(), S3ErrorCode::InvalidArgument, "{bad:?}");
        }
        let e = object_path("b", &"k".repeat(MAX_KEY_BYTES + 1)).unwrap_err();
        assert_eq!(*e.code(), S3ErrorCode::KeyTooLongError);
        assert!(object_path("b", &"k".repeat(MAX_KEY_BYTES)).is_ok());
    }

    #[test]
    fn listing_keys_are_encoded_for_clients_that_decode_plus_as_space() {
        assert_eq!(url_encode("a b/c+d%e~f.g"), "a%20b/c%2Bd%25e~f.g");
        assert_eq!(url_encode("ü"), "%C3%BC");
    }
}

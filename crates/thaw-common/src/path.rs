//! Namespace paths. Every path a request carries is checked here before anything
//! touches a directory: absolute, '/'-separated, no '.' or '..' component, no NUL,
//! bounded length. So a path can never reach outside the under-store root.

use crate::{Result, ThawError};

pub const MAX_PATH_BYTES: usize = 4096;
pub const MAX_NAME_BYTES: usize = 255;

/// Checks and normalises a path: collapses repeated and trailing '/'.
/// Returns the components ("/" has none).
pub fn components(path: &str) -> Result<Vec<&str>> {
    if path.len() > MAX_PATH_BYTES {
        return Err(ThawError::invalid(format!("path is {} bytes long; the limit is {MAX_PATH_BYTES}", path.len())));
    }
    if !path.starts_with('/') {
        return Err(ThawError::invalid(format!("path {path:?} is not absolute (must start with '/')")));
    }
    let mut out = Vec::new();
    for c in path.split('/').filter(|c| !c.is_empty()) {
        if c == "." || c == ".." {
            return Err(ThawError::invalid(format!(
                "path {path:?} has a '{c}' component; paths may not step outside their directory"
            )));
        }
        if c.contains('\0') || c.contains('\\') {
            return Err(ThawError::invalid(format!("path {path:?} contains a NUL or backslash")));
        }
        if c.len() > MAX_NAME_BYTES {
            return Err(ThawError::invalid(format!("path {path:?} has a component over {MAX_NAME_BYTES} bytes")));
        }
        out.push(c);
    }
    Ok(out)
}

/// The normalised form of a path ("/a/b").
pub fn normalize(path: &str) -> Result<String> {
    Ok(join(&components(path)?))
}

pub fn join(components: &[&str]) -> String {
    if components.is_empty() {
        "/".to_string()
    } else {
        components.iter().fold(String::new(), |mut s, c| {
            s.push('/');
            s.push_str(c);
            s
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_and_rejects_escapes() {
        assert_eq!(normalize("/").unwrap(), "/");
        assert_eq!(normalize("//a///b/").unwrap(), "/a/b");
        for bad in ["a/b", "", "/a/../b", "/..", "/a/./b", "/a\0b", "/a\\..\\b"] {
            assert!(normalize(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(normalize(&format!("/{}", "x".repeat(256))).is_err());
        assert!(normalize(&"/x".repeat(3000)).is_err());
    }
}

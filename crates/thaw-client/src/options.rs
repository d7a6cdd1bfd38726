//! A client from named options, as the language bindings take them (Python's
//! keyword arguments, the JVM's `key=value` pairs): one parser, one set of
//! names, the same errors everywhere.

use std::sync::Arc;

use thaw_common::auth::{Credentials, Secret};
use thaw_common::proto::Tier;
use thaw_common::{Result, ThawError};

use crate::{Client, ClientConfig};

/// A client from `options` (each optional): `master` (an address or a
/// group, comma-separated), `job`, `host`, `rack`, `worker`, `short_circuit`
/// (true/false), `read_cache` (mem, disk, none), `token`, `secret_file`,
/// `tls_ca`. What is not given comes from the environment
/// ([`ClientConfig::from_env`], `Credentials::from_env`). An unknown name or a
/// bad value is an `InvalidArgument` error naming it.
pub fn connect_with(options: &[(String, String)]) -> Result<Client> {
    let get = |k: &str| options.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    const KNOWN: [&str; 10] =
        ["master", "job", "host", "rack", "worker", "short_circuit", "read_cache", "token", "secret_file", "tls_ca"];
    if let Some((name, _)) = options.iter().find(|(n, _)| !KNOWN.contains(&n.as_str())) {
        return Err(ThawError::invalid(format!("unknown client option {name:?} (known: {})", KNOWN.join(", "))));
    }
    let mut cfg = ClientConfig::from_env(get("master").filter(|m| !m.is_empty()));
    if let Some(j) = get("job") {
        cfg.job_id = j;
    }
    if let Some(h) = get("host") {
        cfg.position.host = h;
    }
    if let Some(r) = get("rack") {
        cfg.position.rack = r;
    }
    if let Some(w) = get("worker") {
        cfg.position.worker_address = w;
    }
    if let Some(s) = get("short_circuit") {
        cfg.short_circuit = match s.as_str() {
            "true" | "1" => true,
            "false" | "0" => false,
            other => return Err(ThawError::invalid(format!("short_circuit {other:?}: expected true or false"))),
        };
    }
    if let Some(c) = get("read_cache") {
        cfg.cache_on_read = match c.as_str() {
            "mem" => Some(Tier::Mem),
            "disk" => Some(Tier::Disk),
            "none" => None,
            other => {
                return Err(ThawError::invalid(format!(
                    "read_cache {other:?}: expected \"mem\", \"disk\" or \"none\""
                )));
            }
        };
    }
    if let Some(ca) = get("tls_ca") {
        cfg.tls = Some(Arc::new(thaw_common::tls::ClientTls::load(std::path::Path::new(&ca))?));
    }
    // Given credentials, else the environment's (thaw_common::auth).
    let credentials = match (get("token"), get("secret_file")) {
        (Some(t), _) => Some(Credentials::Token(t)),
        (None, Some(path)) => {
            let secret = Arc::new(Secret::load(std::path::Path::new(&path))?);
            let (user, groups) = thaw_common::auth::os_identity();
            Some(Credentials::from_secret(secret, &user, groups)?)
        }
        (None, None) => Credentials::from_env()?,
    };
    Client::with_credentials(cfg, credentials.map(Arc::new))
}

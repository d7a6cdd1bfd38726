//! What a lab is asked for: the network spec (`host=100MiB/s,rack=200MiB/s,rtt=0.2ms`)
//! and the nodes (`NAME@HOST/RACK`), parsed and checked. Pure.

use std::collections::BTreeMap;
use std::time::Duration;

use thaw_common::size::parse_size;

use crate::{Error, Result};

/// The shaping of a lab's links; `None`: that link is not shaped.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NetworkSpec {
    /// Node <-> its host's bridge, bytes/s (default unshaped: nodes on one host
    /// talk at memory-bus speed).
    pub node: Option<u64>,
    /// Host bridge <-> rack bridge, bytes/s.
    pub host: Option<u64>,
    /// Rack bridge <-> core, bytes/s (slower than the sum of its hosts':
    /// oversubscription).
    pub rack: Option<u64>,
    /// Round-trip time added between any two nodes (needs netem).
    pub rtt: Option<Duration>,
}

const KEYS: &str = "keys: node, host, rack, rtt";

impl NetworkSpec {
    /// Parses `node=BW,host=BW,rack=BW,rtt=DURATION` (any subset, any order);
    /// `""` or `none`: nothing shaped. BW as the device model writes it
    /// (`100MiB/s`, `1GiB/s`: a size with units and a required `/s`); DURATION
    /// in `us`, `ms` or `s` (`0.2ms`).
    pub fn parse(spec: &str) -> Result<NetworkSpec> {
        let bad = |why: String| Error::Invalid(format!("network spec {spec:?}: {why}"));
        let mut out = NetworkSpec::default();
        let trimmed = spec.trim();
        if trimmed.is_empty() || trimmed == "none" {
            return Ok(out);
        }
        for part in trimmed.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(bad("empty part (expected e.g. host=100MiB/s,rack=200MiB/s)".into()));
            }
            let Some((key, value)) = part.split_once('=') else {
                return Err(bad(format!("{part:?} is not key=value ({KEYS})")));
            };
            let (key, value) = (key.trim(), value.trim());
            if key == "rtt" {
                let rtt = parse_duration(value).map_err(|why| bad(format!("rtt {value:?}: {why}")))?;
                if out.rtt.replace(rtt).is_some() {
                    return Err(bad("rtt is given twice".into()));
                }
                continue;
            }
            let slot = match key {
                "node" => &mut out.node,
                "host" => &mut out.host,
                "rack" => &mut out.rack,
                other => return Err(bad(format!("unknown key {other:?} ({KEYS})"))),
            };
            let rate = parse_rate(value).map_err(|why| bad(format!("{key} bandwidth {value:?}: {why}")))?;
            if slot.replace(rate).is_some() {
                return Err(bad(format!("{key} is given twice")));
            }
        }
        Ok(out)
    }
}

/// A bandwidth as the device model writes it: `40MiB/s`.
pub fn parse_rate(value: &str) -> std::result::Result<u64, String> {
    let Some(size) = value.strip_suffix("/s") else {
        return Err("needs a /s suffix, e.g. 100MiB/s".into());
    };
    let rate = parse_size(size).map_err(|e| e.message)?;
    if rate == 0 {
        return Err("must be more than 0".into());
    }
    Ok(rate)
}

/// `0.2ms`, `150us`, `1s`: more than zero, at most 10 s.
pub fn parse_duration(value: &str) -> std::result::Result<Duration, String> {
    let split = value.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(value.len());
    let (num, unit) = value.split_at(split);
    let n: f64 = num.parse().map_err(|_| "expected a number with a unit, e.g. 0.2ms".to_string())?;
    let secs = match unit {
        "us" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        "" => return Err("needs a unit (us, ms or s), e.g. 0.2ms".into()),
        other => return Err(format!("unknown unit {other:?} (us, ms or s)")),
    };
    if !(secs > 0.0 && secs <= 10.0) {
        return Err("must be more than 0 and at most 10s".into());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// One node: a network namespace of its own, on a host, in a rack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    pub host: String,
    pub rack: String,
}

/// Node names become part of namespace names (`thaw-<lab>-<node>`): short,
/// and only letters, digits, `_` and `-`, not first.
pub const MAX_NODE_NAME: usize = 32;

impl NodeSpec {
    /// Parses `NAME@HOST/RACK`.
    pub fn parse(text: &str) -> Result<NodeSpec> {
        let bad = |why: &str| Error::Invalid(format!("node {text:?}: {why} (expected NAME@HOST/RACK, e.g. w0@h1/r0)"));
        let (name, place) = text.trim().split_once('@').ok_or_else(|| bad("no @"))?;
        let (host, rack) = place.split_once('/').ok_or_else(|| bad("no / between host and rack"))?;
        check_name(name).map_err(|why| bad(&format!("node name {name:?} {why}")))?;
        for (what, label) in [("host", host), ("rack", rack)] {
            check_label(label).map_err(|why| bad(&format!("{what} {label:?} {why}")))?;
        }
        Ok(NodeSpec { name: name.into(), host: host.into(), rack: rack.into() })
    }
}

fn check_name(name: &str) -> std::result::Result<(), &'static str> {
    if name.is_empty() || name.len() > MAX_NODE_NAME {
        return Err("must have 1 to 32 characters");
    }
    if name.starts_with('-') || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err("may hold only letters, digits, _ and - (not first)");
    }
    Ok(())
}

fn check_label(label: &str) -> std::result::Result<(), &'static str> {
    if label.is_empty() || label.len() > 64 {
        return Err("must have 1 to 64 characters");
    }
    if !label.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        return Err("may hold only letters, digits, _, - and .");
    }
    Ok(())
}

/// Checks a lab's nodes together: at least one, names distinct, and every host
/// in one rack only.
pub fn check_nodes(nodes: &[NodeSpec]) -> Result<()> {
    if nodes.is_empty() {
        return Err(Error::Invalid("a lab needs at least one --node NAME@HOST/RACK".into()));
    }
    let mut names = std::collections::BTreeSet::new();
    let mut racks: BTreeMap<&str, &str> = BTreeMap::new();
    for n in nodes {
        if !names.insert(n.name.as_str()) {
            return Err(Error::Invalid(format!("node name {:?} is given twice: node names must differ", n.name)));
        }
        if let Some(rack) = racks.insert(&n.host, &n.rack).filter(|r| *r != n.rack) {
            return Err(Error::Invalid(format!(
                "host {:?} is in rack {rack:?} and in rack {:?}: a host is in one rack",
                n.host, n.rack
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn specs() {
        let s = NetworkSpec::parse("host=100MiB/s,rack=200MiB/s,rtt=0.2ms").unwrap();
        assert_eq!(s.host, Some(100 * MIB));
        assert_eq!(s.rack, Some(200 * MIB));
        assert_eq!(s.node, None);
        assert_eq!(s.rtt, Some(Duration::from_micros(200)));
        let s = NetworkSpec::parse(" node = 1GiB/s ").unwrap();
        assert_eq!(s.node, Some(1 << 30));
        assert_eq!(NetworkSpec::parse("").unwrap(), NetworkSpec::default());
        assert_eq!(NetworkSpec::parse("none").unwrap(), NetworkSpec::default());
        assert_eq!(NetworkSpec::parse("rtt=150us").unwrap().rtt, Some(Duration::from_micros(150)));
        for (bad, why) in [
            ("host=100MiB", "needs a /s suffix"),
            ("host=0/s", "more than 0"),
            ("host=fast/s", "invalid size"),
            ("disk=1MiB/s", "unknown key \"disk\""),
            ("host=1MiB/s,host=2MiB/s", "host is given twice"),
            ("host=1MiB/s,", "empty part"),
            ("host", "is not key=value"),
            ("rtt=1", "needs a unit"),
            ("rtt=1h", "unknown unit"),
            ("rtt=0ms", "more than 0"),
            ("rtt=20s", "at most 10s"),
            ("rtt=1ms,rtt=2ms", "rtt is given twice"),
        ] {
            let e = NetworkSpec::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(e.contains("network spec"), "{bad}: {e}");
        }
    }

    #[test]
    fn nodes() {
        let n = NodeSpec::parse("w0@h1/r0").unwrap();
        assert_eq!((n.name.as_str(), n.host.as_str(), n.rack.as_str()), ("w0", "h1", "r0"));
        for (bad, why) in [
            ("w0", "no @"),
            ("w0@h1", "no /"),
            ("@h1/r0", "1 to 32"),
            ("w/0@h1/r0", "only letters"),
            ("w.0@h1/r0", "only letters"),
            ("-w@h1/r0", "not first"),
            ("w0@/r0", "host \"\""),
            ("w0@h1/r 0", "rack \"r 0\""),
            (&format!("{}@h/r", "x".repeat(33)), "1 to 32"),
        ] {
            let e = NodeSpec::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn node_sets() {
        let p = |s: &str| NodeSpec::parse(s).unwrap();
        check_nodes(&[p("a@h0/r0"), p("b@h0/r0"), p("c@h1/r1")]).unwrap();
        let e = check_nodes(&[p("a@h0/r0"), p("a@h1/r0")]).unwrap_err().to_string();
        assert!(e.contains("\"a\" is given twice"), "{e}");
        let e = check_nodes(&[p("a@h0/r0"), p("b@h0/r1")]).unwrap_err().to_string();
        assert!(e.contains("host \"h0\" is in rack \"r0\" and in rack \"r1\""), "{e}");
        assert!(check_nodes(&[]).unwrap_err().to_string().contains("at least one"));
    }
}

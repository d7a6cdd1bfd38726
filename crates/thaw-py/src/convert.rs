//! Between Rust and Python: errors become `thaw.errors` exceptions (with the
//! server's message), JSON values become plain dicts and lists.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use thaw_common::ThawError;

/// The `thaw.errors` exception for an error's kind, e.g. `NotFound` (also a
/// `FileNotFoundError`), carrying the message.
pub fn thaw_err(e: ThawError) -> PyErr {
    Python::attach(|py| {
        let made = py
            .import("thaw.errors")
            .and_then(|m| m.getattr("from_kind"))
            .and_then(|f| f.call1((e.kind.as_str(), e.message.clone())));
        match made {
            Ok(exc) => PyErr::from_value(exc),
            Err(import_failed) => import_failed,
        }
    })
}

pub fn json_to_py(py: Python<'_>, v: &serde_json::Value) -> PyResult<Py<PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any().unbind()
            }
        }
        Value::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Array(a) => {
            let list = PyList::empty(py);
            for x in a {
                list.append(json_to_py(py, x)?)?;
            }
            list.into_any().unbind()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any().unbind()
        }
    })
}

//! Prometheus metrics over HTTP, shared by the master and the workers: `/metrics`
//! serves a registry (OpenMetrics to scrapers that ask for it, the classic text
//! format otherwise), [`Scrape`] writes values read from live state at scrape
//! time (no second copy of numbers the code already keeps), and [`Latencies`]
//! is the request-duration histogram both servers use.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
pub use prometheus_client::collector::Collector;
pub use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::encoding::{EncodeCounterValue, EncodeGaugeValue};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
pub use prometheus_client::registry::{Registry, Unit};
use tokio::net::TcpListener;

/// A sample's labels, e.g. `[("tier", "mem")]`.
pub type Labels = Vec<(&'static str, String)>;

/// One label, for short call sites.
pub fn label(key: &'static str, value: impl Into<String>) -> Labels {
    vec![(key, value.into())]
}

/// Writes metric families from values read at scrape time (a collector's body).
pub struct Scrape<'a>(pub DescriptorEncoder<'a>);

impl Scrape<'_> {
    /// A gauge family; `unit` is appended to `name` (Prometheus naming).
    pub fn gauge<V: EncodeGaugeValue>(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        samples: impl IntoIterator<Item = (Labels, V)>,
    ) -> fmt::Result {
        let mut m = self.0.encode_descriptor(name, help, unit.as_ref(), MetricType::Gauge)?;
        for (labels, v) in samples {
            m.encode_family(&labels)?.encode_gauge(&v)?;
        }
        Ok(())
    }

    /// A counter family: `name[_unit]_total`.
    pub fn counter<V: EncodeCounterValue>(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        samples: impl IntoIterator<Item = (Labels, V)>,
    ) -> fmt::Result {
        let mut m = self.0.encode_descriptor(name, help, unit.as_ref(), MetricType::Counter)?;
        for (labels, v) in samples {
            m.encode_family(&labels)?.encode_counter::<Labels, _, f64>(&v, None)?;
        }
        Ok(())
    }
}

/// Buckets of request durations, seconds: 100 us (a metadata call) to 30 s (a
/// large block read or a held heartbeat).
const LATENCY_BUCKETS: [f64; 17] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// Request durations by one label (the RPC method, the data request kind).
#[derive(Clone)]
pub struct Latencies {
    key: &'static str,
    family: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Latencies {
    /// Durations labelled by `key`, kept whether or not they are served.
    pub fn new(key: &'static str) -> Self {
        Latencies { key, family: Family::new_with_constructor(latency_histogram as fn() -> Histogram) }
    }

    /// Serves them from `registry` as `name` (seconds).
    pub fn register(&self, registry: &mut Registry, name: &str, help: &str) {
        // The registry ends the help text with a period itself.
        registry.register_with_unit(name, help.trim_end_matches('.'), Unit::Seconds, self.family.clone());
    }

    pub fn observe(&self, value: &str, took: Duration) {
        self.family.get_or_create(&label(self.key, value)).observe(took.as_secs_f64());
    }
}

/// The OpenMetrics content type, which Prometheus asks for first.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn encode(registry: &Registry, headers: &HeaderMap) -> axum::response::Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let mut body = String::new();
    let (r, content_type) = if openmetrics {
        (prometheus_client::encoding::text::encode(&mut body, registry), OPENMETRICS)
    } else {
        (
            prometheus_client::encoding::prometheus_text::encode(&mut body, registry),
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )
    };
    match r {
        Ok(()) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "metrics encoding failed\n").into_response(),
    }
}

/// Serves `GET /metrics` from `registry` on `listener` until `shutdown`
/// completes. A scrape encodes the registry then, so collectors read live state.
pub async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move |headers: HeaderMap| {
            let registry = registry.clone();
            async move { encode(&registry, &headers) }
        }),
    );
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Two;

    impl prometheus_client::collector::Collector for Two {
        fn encode(&self, e: DescriptorEncoder) -> fmt::Result {
            let mut s = Scrape(e);
            s.gauge("thaw_test_used", "Used.", Some(Unit::Bytes), [(label("tier", "mem"), 2u64)])?;
            s.counter("thaw_test_reads", "Reads.", None, [(label("source", "disk"), 3u64), (Labels::new(), 4u64)])
        }
    }

    #[test]
    fn names_follow_prometheus_conventions() {
        let mut r = Registry::default();
        r.register_collector(Box::new(Two));
        let l = Latencies::new("method");
        l.register(&mut r, "thaw_test_rpc_duration", "Durations.");
        l.observe("Mkdir", Duration::from_millis(3));
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &r).unwrap();
        for want in [
            "thaw_test_used_bytes{tier=\"mem\"} 2\n",
            "thaw_test_reads_total{source=\"disk\"} 3\n",
            "thaw_test_reads_total 4\n",
            "thaw_test_rpc_duration_seconds_count{method=\"Mkdir\"} 1\n",
            "thaw_test_rpc_duration_seconds_bucket{method=\"Mkdir\",le=\"0.005\"} 1\n",
            "# HELP thaw_test_rpc_duration_seconds Durations.\n",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
    }
}

//! Repeats, medians, and the one result type every benchmark reports.

use anyhow::Result;
use serde::Serialize;

use crate::payload::Transfer;

/// A Thaw figure next to its baseline, both the median of the same number of
/// alternating runs.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Short name, as on the command line.
    pub name: String,
    /// What the Thaw side is.
    pub thaw_label: String,
    /// What the baseline is.
    pub baseline_label: String,
    pub unit: &'static str,
    pub thaw: f64,
    pub baseline: f64,
    /// thaw / baseline.
    pub ratio: f64,
    /// The ratio the Thaw side should reach, where there is one.
    pub target: Option<f64>,
    pub thaw_runs: Vec<f64>,
    pub baseline_runs: Vec<f64>,
    /// Anything else worth keeping (where the bytes came from, latencies).
    pub notes: String,
}

impl Comparison {
    pub fn met(&self) -> Option<bool> {
        self.target.map(|t| self.ratio >= t)
    }

    /// The one line printed as soon as a benchmark finishes.
    pub fn line(&self) -> String {
        let verdict = match (self.target, self.met()) {
            (Some(t), Some(true)) => format!("target >= {t:.2}: met"),
            (Some(t), _) => format!("target >= {t:.2}: MISSED"),
            _ => "no target".to_string(),
        };
        format!(
            "{:<22} thaw {:>9.0} {u}  baseline {:>9.0} {u}  ratio {:>5.2}  {verdict}",
            self.name,
            self.thaw,
            self.baseline,
            self.ratio,
            u = self.unit
        )
    }
}

pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Labels and target of a throughput comparison.
pub struct Spec {
    pub name: &'static str,
    pub thaw_label: &'static str,
    pub baseline_label: &'static str,
    pub target: f64,
}

/// Runs the Thaw side and the baseline `repeats` times each, alternating, and
/// swapping which goes first on every repeat so that neither always runs right
/// after the other's caches or allocations. One untimed warm-up run of each side
/// comes first (the first run of a fresh process or cluster is reliably the
/// slowest). Both closures get the run's index, unique across all runs.
pub async fn compare(
    spec: Spec,
    repeats: usize,
    mut thaw: impl AsyncFnMut(usize) -> Result<Transfer>,
    mut baseline: impl AsyncFnMut(usize) -> Result<Transfer>,
) -> Result<Comparison> {
    thaw(repeats).await?;
    baseline(repeats).await?;
    let (mut t_runs, mut b_runs) = (Vec::new(), Vec::new());
    for i in 0..repeats {
        if i % 2 == 0 {
            t_runs.push(thaw(i).await?.mib_per_sec());
            b_runs.push(baseline(i).await?.mib_per_sec());
        } else {
            b_runs.push(baseline(i).await?.mib_per_sec());
            t_runs.push(thaw(i).await?.mib_per_sec());
        }
    }
    let (t, b) = (median(&t_runs), median(&b_runs));
    Ok(Comparison {
        name: spec.name.to_string(),
        thaw_label: spec.thaw_label.to_string(),
        baseline_label: spec.baseline_label.to_string(),
        unit: "MiB/s",
        thaw: t,
        baseline: b,
        ratio: t / b,
        target: Some(spec.target),
        thaw_runs: t_runs,
        baseline_runs: b_runs,
        notes: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}

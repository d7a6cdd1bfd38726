//! Cache affinity at runtime (CAVA, section IV-A) and caching probability
//! (CAVA, section II, IV-B), as the master keeps them.
//!
//! An application is a Thaw job id. Its tasks' measured figures arrive from
//! whoever runs them (the Dask integration's worker plugin: each task's share
//! of its process's CPU time and storage writes, from /proc; `thaw.job`: the
//! process's own while the job is active) and from the workers (bytes it wrote
//! through Thaw; bytes it read from memory and from elsewhere). The decision
//! tree of CAVA, Fig. 4, reconstructed from Table I (every row of which it
//! reproduces with the table's averages as thresholds):
//!
//! - inputs mostly *not* in memory: CPU use and write rate each compared with
//!   a threshold; neither above: **high**; one above: **medium**; both: **low**.
//! - inputs mostly in memory (CPU use says nothing then: an application that
//!   no longer waits for disks always looks busy): write rate above the
//!   threshold: **low**, else **high**.
//!
//! Thresholds are the mean of the figures of the applications measured in the
//! last ten minutes, running or lately ended (the paper's "more than average":
//! its Table I averages seven applications run one after the other; so the
//! same application can change class as the mix changes, and a live one is
//! reclassified whenever the figures are looked at), or fixed values from the
//! command line. (The mean of the live applications alone, tried first, left
//! an application running by itself never above average: a CPU-bound job
//! alone was "high".) A declared
//! affinity (`thaw.job(..., cache_affinity=0.3)`, CAVA's Static-CA) is taken
//! at its word; an application not measured yet starts from the class the
//! last application of its name was given, else the medium class.
//!
//! Caching probability: applications in decreasing order of benefit (affinity
//! x the highest frequency of their inputs) each get the memory that is left
//! after those before them and after cached files of higher benefit no live
//! application reads; an application whose inputs are larger than that caches
//! each block with probability (memory it can get) / (its input size). A file
//! read by several applications is counted once, for the first of them.
//! Applications of equal benefit share what is left equally.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use thaw_common::{Result, ThawError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    High,
    Medium,
    Low,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::High => "high",
            Class::Medium => "medium",
            Class::Low => "low",
        }
    }
}

/// What an application's tasks measurably did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// CPU seconds per second of task time (1.0: one core busy).
    pub cpu_util: f64,
    /// Bytes written per second of task time.
    pub write_rate: f64,
    /// Of its read bytes, the share served from memory without a fill.
    pub cached_fraction: f64,
}

/// The decision tree's thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub cpu: f64,
    pub write: f64,
    /// Inputs at least this much in memory count as "mostly cached".
    pub mostly_cached: f64,
}

/// CAVA, Fig. 4 (see the module doc).
pub fn classify(f: &Figures, t: &Thresholds) -> Class {
    let writes = f.write_rate > t.write;
    if f.cached_fraction >= t.mostly_cached {
        return if writes { Class::Low } else { Class::High };
    }
    match (f.cpu_util > t.cpu, writes) {
        (false, false) => Class::High,
        (true, true) => Class::Low,
        _ => Class::Medium,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AffinityConfig {
    /// Fixed thresholds; `None`: the live applications' mean.
    pub cpu_threshold: Option<f64>,
    pub write_threshold: Option<f64>,
    pub mostly_cached: f64,
    /// Affinity values of the high, medium and low classes (CAVA's
    /// profiled values range 0.04-0.38: grep 0.377, sort 0.146, pagerank 0.041).
    pub values: [f64; 3],
    /// Task time an application needs before it is classified (a short
    /// sample of its tasks, as the paper's first 50 map tasks; short, since
    /// an application whose reads hit memory is short).
    pub min_wall: f64,
}

impl Default for AffinityConfig {
    fn default() -> Self {
        AffinityConfig {
            cpu_threshold: None,
            write_threshold: None,
            mostly_cached: 0.5,
            values: [0.4, 0.2, 0.05],
            min_wall: 0.2,
        }
    }
}

/// Means below these are noise, not a workload's character: an automatic
/// threshold never falls under them (a tenth of a core; 64 KiB/s).
const CPU_FLOOR: f64 = 0.1;
const WRITE_FLOOR: f64 = 64.0 * 1024.0;
/// An application not reported for this long is no longer live (reporters
/// report every second or so while they run).
const LIVE_FOR: Duration = Duration::from_secs(30);
/// An application that ended is still reclassified while figures keep
/// arriving this long after (its last tasks' CPU comes a moment after their
/// end, the bytes it wrote through Thaw with the workers' next heartbeats):
/// otherwise a job that writes at its end would be classified without its
/// writes, and its name remembered so.
const SETTLE: Duration = Duration::from_secs(10);
/// The automatic thresholds average the applications measured this recently.
const RECENT: Duration = Duration::from_secs(600);
/// Applications kept after they stop being live (their affinity still ranks
/// the files they read within the workers' windows).
const KEEP_FOR: Duration = Duration::from_secs(3600);
/// Most applications kept (the oldest ended ones go first).
const MAX_APPS: usize = 10_000;
pub const MAX_NAME: usize = 200;
pub const MAX_INPUTS: usize = 100_000;

impl AffinityConfig {
    pub fn check(&self) -> Result<()> {
        for (what, v) in [("high", self.values[0]), ("medium", self.values[1]), ("low", self.values[2])] {
            if !(0.0..=1.0).contains(&v) {
                return Err(ThawError::invalid(format!("the {what} class's cache affinity {v} is outside [0, 1]")));
            }
        }
        if !(self.values[0] >= self.values[1] && self.values[1] >= self.values[2]) {
            return Err(ThawError::invalid("cache affinities must not rise from high to medium to low"));
        }
        if !(0.0..=1.0).contains(&self.mostly_cached) {
            return Err(ThawError::invalid("the mostly-cached fraction must be within [0, 1]"));
        }
        for t in [self.cpu_threshold, self.write_threshold].into_iter().flatten() {
            if !t.is_finite() || t < 0.0 {
                return Err(ThawError::invalid(format!("a threshold must be a number >= 0, not {t}")));
            }
        }
        Ok(())
    }

    pub fn value(&self, c: Class) -> f64 {
        match c {
            Class::High => self.values[0],
            Class::Medium => self.values[1],
            Class::Low => self.values[2],
        }
    }

    /// The class whose value is nearest `affinity` (how a declared value shows).
    pub fn nearest(&self, affinity: f64) -> Class {
        [Class::High, Class::Medium, Class::Low]
            .into_iter()
            .min_by(|a, b| (self.value(*a) - affinity).abs().total_cmp(&(self.value(*b) - affinity).abs()))
            .expect("three classes")
    }
}

/// What a reporter said of an application (absolute figures so far).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub name: String,
    pub wall_seconds: f64,
    pub cpu_seconds: f64,
    pub tasks: u64,
    pub write_bytes: u64,
    pub inputs: Vec<String>,
    pub declared: Option<f64>,
    pub ended: bool,
    /// Who measured the figures (each reporter's latest are summed).
    pub reporter: String,
}

/// One reporter's latest figures of an application.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Part {
    wall: f64,
    cpu: f64,
    tasks: u64,
    writes: u64,
}

/// Reporters kept per application (a Dask cluster's workers).
const MAX_REPORTERS: usize = 4096;

/// Where an application's class came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Measured,
    Declared,
    History,
    Default,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Measured => "measured",
            Source::Declared => "declared",
            Source::History => "history",
            Source::Default => "default",
        }
    }
}

#[derive(Debug, Clone)]
pub struct App {
    pub job_id: String,
    /// Name, inputs, declared affinity, and the figures summed over reporters.
    pub usage: Usage,
    parts: HashMap<String, Part>,
    pub reported: Instant,
    /// From the workers: bytes written through Thaw, read from memory, read cold.
    pub thaw_written: u64,
    pub bytes_from_memory: u64,
    pub bytes_cold: u64,
    pub figures: Figures,
    pub class: Option<Class>,
    pub affinity: f64,
    pub source: Source,
    pub probability: f64,
    pub thresholds: Option<Thresholds>,
    /// Bytes of its input files (as last looked up).
    pub input_bytes: u64,
}

impl App {
    pub fn live(&self, now: Instant) -> bool {
        !self.usage.ended && now.saturating_duration_since(self.reported) < LIVE_FOR
    }

    fn measured(&self, cfg: &AffinityConfig) -> bool {
        self.usage.tasks > 0 && self.usage.wall_seconds >= cfg.min_wall
    }
}

/// Per-worker access counters of one job, summed by the caller.
#[derive(Debug, Clone, Copy, Default)]
pub struct Access {
    pub bytes_written: u64,
    pub bytes_from_memory: u64,
    pub bytes_cold: u64,
}

/// A file as the workers' policies see it, for the caching probability.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileView {
    pub length: u64,
    pub cached_bytes: u64,
    pub frequency: f64,
    pub benefit: f64,
}

#[derive(Debug, Default)]
pub struct Apps {
    pub config: AffinityConfig,
    apps: HashMap<String, App>,
    /// Application name -> the class its last measured run was given.
    history: HashMap<String, Class>,
}

impl Apps {
    pub fn new(config: AffinityConfig) -> Self {
        Apps { config, ..Default::default() }
    }

    /// Takes a report (absolute figures: it replaces the last).
    pub fn report(&mut self, job_id: &str, usage: Usage, now: Instant) -> Result<()> {
        if let Some(d) = usage.declared
            && !(d.is_finite() && (0.0..=1.0).contains(&d))
        {
            return Err(ThawError::invalid(format!("a cache affinity must be within [0, 1], not {d}")));
        }
        let seconds = |x: f64| x.is_finite() && x >= 0.0;
        if !seconds(usage.wall_seconds) || !seconds(usage.cpu_seconds) {
            return Err(ThawError::invalid("wall and CPU seconds must be numbers >= 0"));
        }
        if usage.name.len() > MAX_NAME || usage.name.chars().any(char::is_control) {
            return Err(ThawError::invalid(format!(
                "an application name is at most {MAX_NAME} bytes, without control characters"
            )));
        }
        if usage.inputs.len() > MAX_INPUTS {
            return Err(ThawError::invalid(format!("at most {MAX_INPUTS} inputs per report")));
        }
        let default = self.config.value(Class::Medium);
        let app = self.apps.entry(job_id.to_string()).or_insert_with(|| App {
            job_id: job_id.to_string(),
            usage: Usage::default(),
            parts: HashMap::new(),
            reported: now,
            thaw_written: 0,
            bytes_from_memory: 0,
            bytes_cold: 0,
            figures: Figures::default(),
            class: None,
            affinity: default,
            source: Source::Default,
            probability: 1.0,
            thresholds: None,
            input_bytes: 0,
        });
        if !usage.inputs.is_empty() {
            app.usage.inputs = usage.inputs;
        }
        if !usage.name.is_empty() {
            app.usage.name = usage.name;
        }
        if usage.declared.is_some() {
            app.usage.declared = usage.declared;
        }
        app.usage.ended |= usage.ended;
        if usage.tasks > 0 || usage.wall_seconds > 0.0 {
            if app.parts.len() >= MAX_REPORTERS && !app.parts.contains_key(&usage.reporter) {
                return Err(ThawError::exhausted(format!("more than {MAX_REPORTERS} reporters for one application")));
            }
            let part = Part {
                wall: usage.wall_seconds,
                cpu: usage.cpu_seconds,
                tasks: usage.tasks,
                writes: usage.write_bytes,
            };
            app.parts.insert(usage.reporter, part);
            let parts = app.parts.values();
            app.usage.wall_seconds = parts.clone().map(|p| p.wall).sum();
            app.usage.cpu_seconds = parts.clone().map(|p| p.cpu).sum();
            app.usage.tasks = parts.clone().map(|p| p.tasks).sum();
            app.usage.write_bytes = parts.map(|p| p.writes).sum();
        }
        app.reported = now;
        self.trim(now);
        Ok(())
    }

    fn trim(&mut self, now: Instant) {
        self.apps.retain(|_, a| a.live(now) || now.saturating_duration_since(a.reported) < KEEP_FOR);
        if self.apps.len() > MAX_APPS {
            let mut old: Vec<(Instant, String)> =
                self.apps.values().filter(|a| !a.live(now)).map(|a| (a.reported, a.job_id.clone())).collect();
            old.sort();
            for (_, id) in old.into_iter().take(self.apps.len() - MAX_APPS) {
                self.apps.remove(&id);
            }
        }
    }

    pub fn get(&self, job_id: &str) -> Option<&App> {
        self.apps.get(job_id)
    }

    pub fn apps(&self) -> impl Iterator<Item = &App> {
        self.apps.values()
    }

    /// Reclassifies every application with the workers' counters (`access`
    /// by job id) and recomputes caching probabilities: `capacity` is the
    /// cluster's memory for cache (MEM less unpersisted blocks),
    /// `files` the workers' view of files by path (inputs not found there are
    /// looked up with `length_of`).
    pub fn refresh(
        &mut self,
        now: Instant,
        access: &HashMap<String, Access>,
        capacity: u64,
        files: &HashMap<String, FileView>,
        length_of: &dyn Fn(&str) -> Option<u64>,
    ) {
        let cfg = self.config.clone();
        for app in self.apps.values_mut() {
            let a = access.get(&app.job_id).copied().unwrap_or_default();
            // Worker counters are soft state: keep the highest seen (a worker
            // that died took its counters with it).
            app.thaw_written = app.thaw_written.max(a.bytes_written);
            app.bytes_from_memory = app.bytes_from_memory.max(a.bytes_from_memory);
            app.bytes_cold = app.bytes_cold.max(a.bytes_cold);
            let wall = app.usage.wall_seconds.max(1e-9);
            let read = app.bytes_from_memory + app.bytes_cold;
            app.figures = Figures {
                cpu_util: app.usage.cpu_seconds / wall,
                write_rate: (app.usage.write_bytes + app.thaw_written) as f64 / wall,
                cached_fraction: if read == 0 { 0.0 } else { app.bytes_from_memory as f64 / read as f64 },
            };
        }
        let recent: Vec<&App> = self
            .apps
            .values()
            .filter(|a| a.measured(&cfg) && a.usage.declared.is_none())
            .filter(|a| now.saturating_duration_since(a.reported) < RECENT)
            .collect();
        let mean = |f: &dyn Fn(&App) -> f64| {
            if recent.is_empty() { 0.0 } else { recent.iter().map(|a| f(a)).sum::<f64>() / recent.len() as f64 }
        };
        let thresholds = Thresholds {
            cpu: cfg.cpu_threshold.unwrap_or_else(|| mean(&|a| a.figures.cpu_util).max(CPU_FLOOR)),
            write: cfg.write_threshold.unwrap_or_else(|| mean(&|a| a.figures.write_rate).max(WRITE_FLOOR)),
            mostly_cached: cfg.mostly_cached,
        };
        for app in self.apps.values_mut() {
            if let Some(d) = app.usage.declared {
                (app.class, app.affinity, app.source) = (Some(cfg.nearest(d)), d, Source::Declared);
            } else if app.measured(&cfg)
                && (app.live(now)
                    || app.source != Source::Measured
                    || now.saturating_duration_since(app.reported) < SETTLE)
            {
                let c = classify(&app.figures, &thresholds);
                (app.class, app.affinity, app.source) = (Some(c), cfg.value(c), Source::Measured);
                app.thresholds = Some(thresholds);
                if !app.usage.name.is_empty() {
                    self.history.insert(app.usage.name.clone(), c);
                }
            } else if app.source != Source::Measured {
                match self.history.get(&app.usage.name).filter(|_| !app.usage.name.is_empty()) {
                    Some(&c) => (app.class, app.affinity, app.source) = (Some(c), cfg.value(c), Source::History),
                    None => (app.class, app.affinity, app.source) = (None, cfg.value(Class::Medium), Source::Default),
                }
            }
        }
        self.probabilities(now, capacity, files, length_of);
    }

    /// CAVA's caching probability computation (see the module doc).
    fn probabilities(
        &mut self,
        now: Instant,
        capacity: u64,
        files: &HashMap<String, FileView>,
        length_of: &dyn Fn(&str) -> Option<u64>,
    ) {
        let len = |p: &str| files.get(p).map(|f| f.length).or_else(|| length_of(p)).unwrap_or(0);
        let freq = |p: &str| files.get(p).map_or(0.0, |f| f.frequency);
        let mut order: Vec<(f64, String)> = Vec::new();
        for app in self.apps.values_mut() {
            app.probability = 1.0;
            app.input_bytes = app.usage.inputs.iter().map(|p| len(p)).sum();
            if app.live(now) && !app.usage.inputs.is_empty() {
                let top = app.usage.inputs.iter().map(|p| freq(p)).fold(1.0f64, f64::max);
                order.push((app.affinity * top, app.job_id.clone()));
            }
        }
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let inputs_of_live: HashSet<&str> =
            order.iter().flat_map(|(_, id)| self.apps[id].usage.inputs.iter().map(String::as_str)).collect();
        let mut counted: HashSet<String> = HashSet::new();
        let mut used = 0u64;
        let mut i = 0;
        let mut result: Vec<(String, f64)> = Vec::new();
        while i < order.len() {
            let benefit = order[i].0;
            let group: Vec<String> =
                order[i..].iter().take_while(|(b, _)| *b == benefit).map(|(_, id)| id.clone()).collect();
            i += group.len();
            // Cached files no live application reads, worth at least as much.
            let others: u64 = files
                .iter()
                .filter(|(p, f)| f.benefit >= benefit && !inputs_of_live.contains(p.as_str()))
                .map(|(_, f)| f.cached_bytes)
                .sum();
            let avail = capacity.saturating_sub(used).saturating_sub(others);
            let needs: Vec<u64> = group
                .iter()
                .map(|id| {
                    let mut n = 0;
                    for p in &self.apps[id].usage.inputs {
                        if counted.insert(p.clone()) {
                            n += len(p);
                        }
                    }
                    n
                })
                .collect();
            let total: u64 = needs.iter().sum();
            if total <= avail {
                group.iter().for_each(|id| result.push((id.clone(), 1.0)));
                used += total;
                continue;
            }
            let share = avail as f64 / group.len() as f64;
            for (id, need) in group.iter().zip(&needs) {
                let p = if *need == 0 { 1.0 } else { (share / *need as f64).min(1.0) };
                result.push((id.clone(), p));
            }
            used += avail;
        }
        for (id, p) in result {
            if let Some(a) = self.apps.get_mut(&id) {
                a.probability = p;
            }
        }
    }

    /// (job id, affinity, probability) of every application kept, for the workers.
    pub fn table(&self) -> Vec<(String, f64, f64)> {
        self.apps.values().map(|a| (a.job_id.clone(), a.affinity, a.probability)).collect()
    }

    pub fn default_affinity(&self) -> f64 {
        self.config.value(Class::Medium)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CAVA, Table I: CPU %, file writes KB/s, and the class the paper
    /// reports; the thresholds are the table's averages.
    const TABLE_I: [(&str, f64, f64, Class); 7] = [
        ("grep", 7.03, 4.00, Class::High),
        ("wordcount", 51.47, 5.89, Class::Medium),
        ("sort", 16.68, 2885.42, Class::Medium),
        ("aggregation", 26.04, 169.36, Class::High),
        ("join", 29.88, 345.77, Class::Medium),
        ("selection", 18.48, 5.77, Class::High),
        ("pagerank", 35.56, 1756.41, Class::Low),
    ];

    #[test]
    fn the_tree_reproduces_every_row_of_cava_table_i() {
        let t = Thresholds { cpu: 26.45, write: 738.95, mostly_cached: 0.5 };
        for (app, cpu, write, class) in TABLE_I {
            let f = Figures { cpu_util: cpu, write_rate: write, cached_fraction: 0.0 };
            assert_eq!(classify(&f, &t), class, "{app}");
        }
    }

    #[test]
    fn with_inputs_mostly_cached_only_writes_decide() {
        let t = Thresholds { cpu: 0.3, write: 1000.0, mostly_cached: 0.5 };
        let busy = Figures { cpu_util: 0.9, write_rate: 10.0, cached_fraction: 0.8 };
        assert_eq!(classify(&busy, &t), Class::High, "busy because it no longer waits");
        let writer = Figures { write_rate: 5000.0, ..busy };
        assert_eq!(classify(&writer, &t), Class::Low);
    }

    fn usage(name: &str, wall: f64, cpu: f64, writes: u64) -> Usage {
        Usage {
            name: name.into(),
            wall_seconds: wall,
            cpu_seconds: cpu,
            tasks: 4,
            write_bytes: writes,
            ..Default::default()
        }
    }

    fn refresh(apps: &mut Apps, now: Instant) {
        apps.refresh(now, &HashMap::new(), 0, &HashMap::new(), &|_| None);
    }

    #[test]
    fn classes_follow_the_mix_of_live_applications_and_names_remember_them() {
        let now = Instant::now();
        let mut apps = Apps::new(AffinityConfig::default());
        const MB: u64 = 1 << 20;
        apps.report("g1", usage("grep", 10.0, 1.5, 0), now).unwrap();
        apps.report("s1", usage("sort", 10.0, 3.0, 200 * MB), now).unwrap();
        apps.report("p1", usage("pagerank", 10.0, 9.0, 150 * MB), now).unwrap();
        refresh(&mut apps, now);
        let class = |apps: &Apps, id: &str| apps.get(id).unwrap().class.unwrap();
        assert_eq!(class(&apps, "g1"), Class::High);
        assert_eq!(class(&apps, "s1"), Class::Medium, "writes above the mean, CPU below");
        assert_eq!(class(&apps, "p1"), Class::Low);
        // Sort alone with a heavier writer and CPU hog beside it: the mean
        // moves and sort is reclassified.
        apps.report("g1", Usage { ended: true, ..usage("grep", 10.0, 1.5, 0) }, now).unwrap();
        apps.report("x1", usage("etl", 10.0, 9.5, 900 * MB), now).unwrap();
        refresh(&mut apps, now);
        assert_eq!(class(&apps, "s1"), Class::High, "below the new means on both");
        // The ended grep still counts in the averages (measured lately): a
        // CPU hog running alone later is not "average" by itself.
        apps.report("p1", Usage { ended: true, ..usage("pagerank", 10.0, 9.0, 150 * MB) }, now).unwrap();
        apps.report("s1", Usage { ended: true, ..usage("sort", 10.0, 3.0, 200 * MB) }, now).unwrap();
        apps.report("x1", Usage { ended: true, ..usage("etl", 10.0, 9.5, 900 * MB) }, now).unwrap();
        apps.report("p2", usage("pagerank", 10.0, 9.0, 150 * MB), now).unwrap();
        refresh(&mut apps, now);
        assert_eq!(class(&apps, "p2"), Class::Medium, "CPU above the recent mean, writes below");
        // A new run of grep starts from grep's last class before it is measured.
        apps.report("g2", Usage { tasks: 0, ..usage("grep", 0.0, 0.0, 0) }, now).unwrap();
        refresh(&mut apps, now);
        let g2 = apps.get("g2").unwrap();
        assert_eq!((g2.class, g2.source), (Some(Class::High), Source::History));
        // A stranger with nothing measured: the medium class by default.
        apps.report("new", Usage { tasks: 0, ..usage("other", 0.0, 0.0, 0) }, now).unwrap();
        refresh(&mut apps, now);
        let n = apps.get("new").unwrap();
        assert_eq!((n.class, n.source, n.affinity), (None, Source::Default, 0.2));
    }

    #[test]
    fn figures_of_several_reporters_add_up_and_a_bare_report_keeps_them() {
        let now = Instant::now();
        let mut apps = Apps::new(AffinityConfig::default());
        let from = |r: &str, wall: f64, cpu: f64| Usage { reporter: r.into(), ..usage("", wall, cpu, 10) };
        let first = Usage { inputs: vec!["/in".into()], tasks: 0, ..usage("sort", 0.0, 0.0, 0) };
        apps.report("j", first, now).unwrap();
        apps.report("j", from("w1", 4.0, 1.0), now).unwrap();
        apps.report("j", from("w2", 6.0, 2.0), now).unwrap();
        apps.report("j", from("w1", 5.0, 1.5), now).unwrap(); // w1's latest replaces its last
        let u = &apps.get("j").unwrap().usage;
        assert_eq!((u.wall_seconds, u.cpu_seconds, u.write_bytes, u.tasks), (11.0, 3.5, 20, 8));
        assert_eq!((u.name.as_str(), u.inputs.len()), ("sort", 1), "kept from the first report");
        apps.report("j", Usage { ended: true, ..Usage::default() }, now).unwrap();
        let a = apps.get("j").unwrap();
        assert!(!a.live(now) && a.usage.wall_seconds == 11.0);
    }

    #[test]
    fn figures_arriving_just_after_the_end_still_count() {
        let now = Instant::now();
        let mut apps =
            Apps::new(AffinityConfig { write_threshold: Some(1e6), cpu_threshold: Some(0.5), ..Default::default() });
        apps.report("w", usage("writer", 10.0, 1.0, 0), now).unwrap();
        apps.report("w", Usage { ended: true, ..Usage::default() }, now).unwrap();
        refresh(&mut apps, now);
        assert_eq!(apps.get("w").unwrap().class, Some(Class::High));
        // Its writes through Thaw reach the master with the workers' next heartbeat.
        let later = now + Duration::from_secs(1);
        let access: HashMap<String, Access> =
            [("w".to_string(), Access { bytes_written: 100 << 20, ..Default::default() })].into();
        apps.refresh(later, &access, 0, &HashMap::new(), &|_| None);
        assert_eq!(apps.get("w").unwrap().class, Some(Class::Medium), "reclassified with its writes");
        // Long after, the class stays what it was.
        let access: HashMap<String, Access> = HashMap::new();
        apps.refresh(now + Duration::from_secs(60), &access, 0, &HashMap::new(), &|_| None);
        assert_eq!(apps.get("w").unwrap().class, Some(Class::Medium));
        assert_eq!(apps.history.get("writer"), Some(&Class::Medium));
    }

    #[test]
    fn a_declared_affinity_is_taken_at_its_word_and_bad_ones_are_refused() {
        let now = Instant::now();
        let mut apps = Apps::new(AffinityConfig::default());
        apps.report("d", Usage { declared: Some(0.3), ..usage("d", 10.0, 9.0, 1 << 40) }, now).unwrap();
        refresh(&mut apps, now);
        let d = apps.get("d").unwrap();
        assert_eq!((d.affinity, d.source), (0.3, Source::Declared));
        for bad in [-0.1, 1.5, f64::NAN] {
            let e = apps.report("e", Usage { declared: Some(bad), ..Usage::default() }, now).unwrap_err();
            assert!(e.message.contains("within [0, 1]"), "{e}");
        }
        let cfg = AffinityConfig { values: [0.4, 1.2, 0.1], ..Default::default() };
        assert!(cfg.check().is_err());
    }

    #[test]
    fn inputs_larger_than_memory_are_cached_with_the_probability_that_fits_them() {
        let now = Instant::now();
        let mut apps = Apps::new(AffinityConfig::default());
        let with = |name: &str, declared: f64, inputs: &[&str]| Usage {
            declared: Some(declared),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            ..usage(name, 1.0, 0.1, 0)
        };
        apps.report("hi", with("hi", 0.4, &["/a"]), now).unwrap();
        apps.report("mid", with("mid", 0.2, &["/b", "/a"]), now).unwrap();
        apps.report("lo1", with("lo", 0.05, &["/c"]), now).unwrap();
        apps.report("lo2", with("lo", 0.05, &["/d"]), now).unwrap();
        let sizes: HashMap<&str, u64> = [("/a", 60), ("/b", 30), ("/c", 40), ("/d", 20)].into();
        let len = |p: &str| sizes.get(p).copied();
        apps.refresh(now, &HashMap::new(), 100, &HashMap::new(), &len);
        let p = |apps: &Apps, id: &str| apps.get(id).unwrap().probability;
        // hi takes 60; mid needs only /b (30; /a is counted once) and fits; the
        // two low ones share the last 10 equally: 5 of 40 and 5 of 20.
        assert_eq!((p(&apps, "hi"), p(&apps, "mid")), (1.0, 1.0));
        let (lo1, lo2) = (p(&apps, "lo1"), p(&apps, "lo2"));
        assert!((lo1 - 0.125).abs() < 1e-9 && (lo2 - 0.25).abs() < 1e-9, "{lo1} {lo2}");
        assert_eq!(apps.get("mid").unwrap().input_bytes, 90);
        // A cached file worth more that nobody live reads keeps its room.
        let files: HashMap<String, FileView> =
            [("/old".to_string(), FileView { length: 50, cached_bytes: 50, frequency: 9.0, benefit: 3.6 })].into();
        apps.refresh(now, &HashMap::new(), 100, &files, &len);
        assert!((p(&apps, "hi") - 50.0 / 60.0).abs() < 1e-9, "{}", p(&apps, "hi"));
        assert_eq!(p(&apps, "lo1"), 0.0);
    }
}

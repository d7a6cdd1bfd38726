//! The master's lineage calls (Tachyon, section 2.5's submitDependency), checked
//! against the namespace before anything is journaled: a request that fails a
//! check records nothing.

use std::collections::HashSet;

use thaw_common::proto::*;
use thaw_common::{ErrorKind, Result, ThawError, now_ms, path};

use super::{Master, State};
use crate::lineage::{MAX_COMMAND_BYTES, MAX_CONFIG_BYTES, MAX_FILES};

/// A lineage as clients see it: its inputs' paths as of now.
fn info(st: &State, r: &LineageRecord) -> LineageInfo {
    LineageInfo {
        lineage_id: r.id,
        input_fids: r.input_fids.clone(),
        input_paths: r
            .input_fids
            .iter()
            .map(|f| if st.ns.get(*f).is_some() { st.ns.path_of(*f) } else { String::new() })
            .collect(),
        output_paths: r.output_paths.clone(),
        output_fids: r.output_fids.clone(),
        command: r.command.clone(),
        config: r.config.clone(),
        kind: r.kind,
        created_ms: r.created_ms,
        broken: r.broken.clone(),
        ..st.recomputer.rerun_record(r.id)
    }
}

/// Whether `argv0` names a program this host can run: an executable file, by
/// path or on PATH (the default executor runs commands on the master's host).
fn runnable(argv0: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let exec =
        |p: &std::path::Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if argv0.contains('/') {
        return exec(std::path::Path::new(argv0));
    }
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| exec(&d.join(argv0))))
}

impl Master {
    /// Records a lineage entry (Tachyon, section 2.5) after checking every part of it.
    pub async fn submit_dependency(&self, req: SubmitDependencyRequest) -> Result<SubmitDependencyResponse> {
        let kind = DependencyKind::try_from(req.kind)
            .ok()
            .filter(|k| *k != DependencyKind::Unspecified)
            .ok_or_else(|| ThawError::invalid("a lineage's kind is narrow or wide"))?;
        if req.output_paths.is_empty() {
            return Err(ThawError::invalid("a lineage needs at least one output"));
        }
        if req.input_fids.len() > MAX_FILES || req.output_paths.len() > MAX_FILES {
            return Err(ThawError::invalid(format!("a lineage names at most {MAX_FILES} inputs and outputs each")));
        }
        if kind == DependencyKind::Narrow && req.input_fids.len() != req.output_paths.len() {
            return Err(ThawError::invalid(format!(
                "a narrow lineage derives output i from input i alone: {} inputs for {} outputs",
                req.input_fids.len(),
                req.output_paths.len()
            )));
        }
        if req.config.len() > MAX_CONFIG_BYTES {
            return Err(ThawError::invalid(format!(
                "the lineage's config is {} bytes; the limit is {MAX_CONFIG_BYTES} (configuration, not data)",
                req.config.len()
            )));
        }
        let command_bytes: usize = req.command.iter().map(|a| a.len() + 1).sum();
        match req.command.first() {
            None => return Err(ThawError::invalid("a lineage needs a command to rerun")),
            Some(a) if a.is_empty() => return Err(ThawError::invalid("the command's program is empty")),
            _ if command_bytes > MAX_COMMAND_BYTES => {
                return Err(ThawError::invalid(format!(
                    "the command line is {command_bytes} bytes; the limit is {MAX_COMMAND_BYTES}"
                )));
            }
            _ if req.command.iter().any(|a| a.contains('\0')) => {
                return Err(ThawError::invalid("the command line contains a NUL byte"));
            }
            Some(a) if !runnable(a) => {
                return Err(ThawError::invalid(format!(
                    "the command {a:?} is not runnable on the master's host (not an executable file, nor on PATH)"
                )));
            }
            _ => {}
        }
        let mut outputs = Vec::with_capacity(req.output_paths.len());
        let mut seen = HashSet::new();
        for p in &req.output_paths {
            let p = path::normalize(p)?;
            if p == "/" {
                return Err(ThawError::invalid("/ cannot be a lineage's output"));
            }
            if !seen.insert(p.clone()) {
                return Err(ThawError::invalid(format!("{p} is named twice among the outputs")));
            }
            outputs.push(p);
        }
        // Inputs: existing, complete files.
        let input_paths: Vec<String> = {
            let st = self.read();
            let mut v = Vec::with_capacity(req.input_fids.len());
            for f in &req.input_fids {
                match st.ns.get(*f) {
                    Some(i) if i.is_dir() => {
                        return Err(ThawError::invalid(format!(
                            "input FID {f} is the directory {}: name its files",
                            st.ns.path_of(*f)
                        )));
                    }
                    Some(i) if !i.complete() => {
                        return Err(ThawError::precondition(format!(
                            "input FID {f} ({}) is still being written",
                            st.ns.path_of(*f)
                        )));
                    }
                    Some(_) => v.push(st.ns.path_of(*f)),
                    None => {
                        return Err(ThawError::not_found(format!(
                            "input FID {f} does not exist (never written, or deleted or replaced since)"
                        )));
                    }
                }
            }
            v
        };
        for o in &outputs {
            if let Some(i) = input_paths.iter().position(|p| p == o) {
                return Err(ThawError::invalid(format!(
                    "a cycle: {o} is both an input (FID {}) and an output",
                    req.input_fids[i]
                )));
            }
            // Resolving loads an under-store file not seen yet: that exists too.
            match self.resolve(o).await {
                Ok(_) => return Err(ThawError::already_exists(format!("output {o} already exists"))),
                Err(e) if e.kind == ErrorKind::NotFound || e.kind == ErrorKind::NotADirectory => {}
                Err(e) => return Err(e),
            }
        }
        let mut guard = self.write();
        let st = &mut *guard;
        for o in &outputs {
            if st.ns.lookup(&path::components(o)?).is_some() {
                return Err(ThawError::already_exists(format!("output {o} already exists")));
            }
            if let Some((l, _)) = st.lineages.pending_output(o) {
                return Err(ThawError::already_exists(format!(
                    "{o} is already an output of lineage {l}, not written yet"
                )));
            }
        }
        if req.input_fids.iter().any(|f| st.ns.get(*f).is_none()) {
            return Err(ThawError::not_found("an input was deleted while the lineage was checked"));
        }
        let (id, op) = st.lineages.submit(req.input_fids, outputs, req.command, req.config, kind, now_ms());
        self.commit(st, &[op])?;
        tracing::info!(lineage = id, "lineage recorded");
        let rec = st.lineages.get(id).expect("just recorded");
        Ok(SubmitDependencyResponse { lineage: Some(info(st, rec)) })
    }

    /// A lineage by id, or the one that wrote the file at a path.
    pub async fn get_lineage(&self, req: GetLineageRequest) -> Result<GetLineageResponse> {
        let id = if req.lineage_id != 0 {
            req.lineage_id
        } else {
            let fid = self.resolve(&req.path).await?;
            let st = self.read();
            let l = st.ns.get(fid).map_or(0, |i| i.lineage_id());
            if l == 0 {
                return Err(ThawError::not_found(format!("no lineage wrote {}", st.ns.path_of(fid))));
            }
            l
        };
        let st = self.read();
        let rec = st.lineages.get(id).ok_or_else(|| {
            ThawError::not_found(format!("no lineage {id} (never recorded, or every output was deleted)"))
        })?;
        Ok(GetLineageResponse { lineage: Some(info(&st, rec)) })
    }

    pub fn list_lineage(&self) -> ListLineageResponse {
        let st = self.read();
        ListLineageResponse { lineages: st.lineages.iter().map(|r| info(&st, r)).collect() }
    }
}

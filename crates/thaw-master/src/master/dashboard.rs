//! What the web dashboard reads beyond the gRPC calls' answers.

use super::*;

impl Master {
    /// Totals of the subtree at `path` (a directory the namespace knows),
    /// walking at most `budget` files: one page must not stall the master's
    /// lock on a namespace of millions of files. No under-store calls.
    pub fn dir_totals(&self, path: &str, budget: usize) -> Result<DirTotals> {
        let comps = path::components(path)?;
        let st = self.read();
        let id = st.ns.lookup(&comps).ok_or_else(|| ThawError::not_found(format!("no such directory: {path}")))?;
        Ok(st.ns.totals(id, budget, |file_id, index| {
            st.cluster.block(block_id(file_id, index)).is_some_and(|b| b.replicas.iter().any(|x| x.tier == Tier::Mem))
        }))
    }

    /// The newest `n` migration events, newest first, each with its block's file
    /// path (`None`: the file is gone). One read lock, however long the log.
    pub fn recent_migration_events(&self, n: usize) -> Vec<(MigrationEvent, Option<String>)> {
        let st = self.read();
        st.migrations
            .recent_events(n)
            .map(|e| {
                let file = file_of_block(e.block_id);
                (e.clone(), st.ns.get(file).map(|_| st.ns.path_of(file)))
            })
            .collect()
    }
}

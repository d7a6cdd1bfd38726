//! What the web dashboard reads beyond the gRPC calls' answers.

use super::*;

impl Master {
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

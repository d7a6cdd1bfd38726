//! What a rename on the under-store changes besides the path.

use std::collections::HashMap;

use super::*;

impl State {
    /// Records the mtimes of the objects an object store's rename made for
    /// entry `id`, now at `dst` (`copied`: paths relative to `dst`, "" for a
    /// file, from `UnderStore::rename`). Without them the next listing of the
    /// directory takes each moved file for one another tool replaced (its
    /// mtime differs) and swaps it for a new inode loaded from the store:
    /// owner, mode and the copy in memory lost.
    pub(super) fn record_copies(
        &mut self,
        id: u64,
        dst: &str,
        copied: Vec<(String, thaw_ufs::UfsStatus)>,
    ) -> Result<Vec<JournalOp>> {
        if copied.is_empty() {
            return Ok(Vec::new());
        }
        let copied: HashMap<String, u64> = copied.into_iter().map(|(rel, s)| (rel, s.mtime_ms)).collect();
        let files = if self.ns.get(id).is_some_and(|i| i.is_dir()) { self.ns.files_under(id) } else { vec![id] };
        let mut ops = Vec::new();
        for f in files {
            let at = self.ns.path_of(f);
            let rel = at.strip_prefix(dst).unwrap_or_default().trim_start_matches('/');
            let rec = self.ns.get(f).expect("listed");
            if let Some(&mtime) = copied.get(rel)
                && rec.persisted()
                && rec.ufs_mtime_ms() != mtime
            {
                ops.push(self.ns.update(f, |r| r.ufs_mtime_ms = mtime)?);
            }
        }
        Ok(ops)
    }
}

//! An in-process store, for tests and single-process tools: the core's
//! reference store (`MemoryClaims`) behind a mutex.

use std::sync::{Mutex, MutexGuard};

use intentkey::claim::{
    ClaimStore, Completion, MemoryClaims, Record, Release, Replacement, Status,
};

use super::{Store, StoreError};

/// Records in a mutex-guarded map: the map's key uniqueness is the
/// constraint, and every fenced condition is the core's `MemoryClaims`.
#[derive(Default)]
pub struct MemoryStore {
    records: Mutex<MemoryClaims>,
}

impl MemoryStore {
    fn records(&self) -> MutexGuard<'_, MemoryClaims> {
        // A panic elsewhere cannot leave a record half-written (each operation
        // is one map call), so a poisoned lock is safe to keep using.
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn ok<T>(r: Result<T, std::convert::Infallible>) -> Result<T, StoreError> {
    r.map_err(|never| match never {})
}

impl Store for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn insert(&self, record: &Record) -> Result<bool, StoreError> {
        ok(self.records().insert(record))
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        ok(self.records().get(key))
    }

    fn complete(&self, completion: &Completion) -> Result<bool, StoreError> {
        ok(self.records().complete(completion))
    }

    fn replace(&self, replacement: &Replacement) -> Result<bool, StoreError> {
        ok(self.records().replace(replacement))
    }

    fn release(&self, release: &Release) -> Result<bool, StoreError> {
        ok(self.records().release(release))
    }

    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        let records = self.records();
        let mut out: Vec<Record> = records
            .records()
            .values()
            .filter(|r| status.is_none_or(|s| r.status == s))
            .cloned()
            .collect();
        out.sort_by(|a, b| (a.created_at, &a.key).cmp(&(b.created_at, &b.key)));
        out.truncate(limit);
        Ok(out)
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        ok(self.records().purge(now))
    }
}

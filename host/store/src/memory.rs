//! An in-process store, for tests and single-process tools.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use intentkey::claim::{purgeable, Record, Status};

use super::{Store, StoreError};

/// Records in a mutex-guarded map: the map's key uniqueness is the constraint.
#[derive(Default)]
pub struct MemoryStore {
    records: Mutex<BTreeMap<String, Record>>,
}

impl MemoryStore {
    fn records(&self) -> MutexGuard<'_, BTreeMap<String, Record>> {
        // A panic elsewhere cannot leave a record half-written (each operation
        // is one map call), so a poisoned lock is safe to keep using.
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Store for MemoryStore {
    fn insert_if_absent(&self, record: &Record) -> Result<bool, StoreError> {
        let mut records = self.records();
        if records.contains_key(&record.key) {
            return Ok(false);
        }
        records.insert(record.key.clone(), record.clone());
        Ok(true)
    }

    fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        Ok(self.records().get(key).cloned())
    }

    fn replace_in_flight(&self, record: &Record) -> Result<bool, StoreError> {
        let mut records = self.records();
        match records.get_mut(&record.key) {
            Some(stored) if stored.status == Status::InFlight => {
                *stored = Record {
                    fingerprint: stored.fingerprint.clone(),
                    tenant_id: stored.tenant_id.clone(),
                    action_type: stored.action_type.clone(),
                    created_at: stored.created_at,
                    ..record.clone()
                };
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn list(&self, status: Option<Status>, limit: usize) -> Result<Vec<Record>, StoreError> {
        let mut out: Vec<Record> = self
            .records()
            .values()
            .filter(|r| status.is_none_or(|s| r.status == s))
            .cloned()
            .collect();
        out.sort_by_key(|r| r.created_at);
        out.truncate(limit);
        Ok(out)
    }

    fn purge(&self, now: i64) -> Result<u64, StoreError> {
        let mut records = self.records();
        let before = records.len();
        records.retain(|_, r| !purgeable(r, now));
        Ok((before - records.len()) as u64)
    }
}

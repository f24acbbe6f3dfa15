//! Claims whose insert is still running after its caller stopped waiting.
//!
//! A claim's insert that does not answer within the store deadline is
//! abandoned by its caller (the serve flow answers 503 and hands the claim
//! back to be released), but the statement may already be on its way and
//! commit later. Sent on another connection, the release could reach the
//! store first, find nothing, and the late insert would then leave the key
//! in flight with no handler ever run. So a store runs each claim's insert
//! to its end whatever its caller does (a blocking thread, or a task of its
//! own) and registers it here under its key and owner token; the release of
//! that claim waits until the insert has ended (answered, or failed with its
//! connection). Retries of one key overlap, each under a token of its own,
//! so each insert is tracked by itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use std::future::Future;

use super::StoreFuture;
use crate::StoreError;
use intentkey::claim::{Record, Release};
use tokio::sync::watch;

/// A claim: its key and owner token.
type Claim = (String, String);

/// The inserts running now, by claim.
#[derive(Clone, Default)]
pub(crate) struct Inserts(Arc<Mutex<HashMap<Claim, watch::Receiver<bool>>>>);

/// One running insert: dropped when the insert has ended (however it ends),
/// it wakes the release waiting for it.
pub(crate) struct Running {
    claim: Claim,
    inserts: Inserts,
    ended: watch::Sender<bool>,
}

impl Inserts {
    fn lock(&self) -> MutexGuard<'_, HashMap<Claim, watch::Receiver<bool>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers the insert of `record`, running until the answer is dropped.
    pub(crate) fn start(&self, record: &Record) -> Running {
        self.register((record.key.clone(), record.owner_token.clone()))
    }

    fn register(&self, claim: Claim) -> Running {
        let (ended, running) = watch::channel(false);
        self.lock().insert(claim.clone(), running);
        Running {
            claim,
            inserts: self.clone(),
            ended,
        }
    }

    /// Runs `insert` (the statement of `record`'s claim) to its end in a
    /// task of its own, registered until then, and answers what it answers.
    /// Nothing starts before the answer is first polled (inside the
    /// runtime); once started, dropping the answer does not stop it.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        record: &Record,
        insert: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> StoreFuture<'static, T> {
        let inserts = self.clone();
        let (key, owner_token) = (record.key.clone(), record.owner_token.clone());
        Box::pin(async move {
            let running = inserts.register((key, owner_token));
            let task = tokio::spawn(async move {
                let inserted = insert.await;
                drop(running);
                inserted
            });
            task.await
                .map_err(|e| StoreError::fatal(format!("the insert's task failed: {e}")))?
        })
    }

    /// Waits until the insert of `release`'s claim is not running.
    pub(crate) async fn settled(&self, release: &Release) {
        let claim = (release.key.clone(), release.owner_token.clone());
        let running = self.lock().get(&claim).cloned();
        if let Some(mut running) = running {
            let _ = running.wait_for(|ended| *ended).await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.inserts.lock().remove(&self.claim);
        let _ = self.ended.send(true);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use intentkey::claim::Attempt;
    use std::time::Duration;

    /// A claim of the key `k1` under `token`.
    pub(in crate::tokio) fn record(token: &str) -> Record {
        let attempt = Attempt {
            key: "k1".into(),
            fingerprint: "fp".into(),
            tenant_id: "t1".into(),
            action_type: "pay".into(),
            prior: None,
        };
        Record::in_flight(&attempt, token, 1_700_000_000)
    }

    /// The release of that claim.
    pub(in crate::tokio) fn release(token: &str) -> Release {
        Release {
            key: "k1".into(),
            owner_token: token.into(),
        }
    }

    #[test]
    fn a_release_waits_for_its_own_claim_only() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let inserts = Inserts::default();
            let second = inserts.start(&record("t2"));
            let third = inserts.start(&record("t3"));
            drop(third);
            // Another token's insert, or none: no wait.
            tokio::time::timeout(Duration::from_millis(100), inserts.settled(&release("t3")))
                .await
                .expect("the third claim's insert has ended");
            tokio::time::timeout(Duration::from_millis(100), inserts.settled(&release("t1")))
                .await
                .expect("the first claim has no insert running");
            // Its own: the release waits until the insert ends.
            let waiting =
                tokio::time::timeout(Duration::from_millis(50), inserts.settled(&release("t2")))
                    .await;
            assert!(waiting.is_err(), "the release waits while its insert runs");
            let waiter = tokio::spawn({
                let inserts = inserts.clone();
                async move { inserts.settled(&release("t2")).await }
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
            drop(second);
            tokio::time::timeout(Duration::from_secs(1), waiter)
                .await
                .expect("woken when the insert ends")
                .unwrap();
            assert!(inserts.lock().is_empty(), "nothing is left registered");
        });
    }
}

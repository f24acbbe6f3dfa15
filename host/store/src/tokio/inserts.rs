//! Claims whose insert is still running after its caller stopped waiting.
//!
//! A claim's insert that does not answer within the store deadline is
//! abandoned by its caller (the serve flow answers 503 and hands the claim
//! back to be released), but the statement may already be on its way and
//! commit later. Sent on another connection, the release could reach the
//! store first, find nothing, and the late insert would then leave the key
//! in flight with no handler ever run. So a store runs each claim's insert
//! to its end whatever its caller does (on a blocking thread, or in the
//! caller's task and, once the caller drops it, in a task of its own) and
//! registers it here under its key and owner token; the release of
//! that claim waits until the insert has ended (answered, or failed with its
//! connection). Retries of one key overlap, each under a token of its own,
//! so each insert is tracked by itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

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

    /// Runs `insert` (the statement of `record`'s claim) to its end,
    /// registered until then, and answers what it answers. Nothing starts
    /// before the answer is first polled (inside the runtime); once started,
    /// dropping the answer does not stop it: the insert is polled in the
    /// caller's task while the caller waits (no task of its own, no hop
    /// between worker threads), and what is left of it when the answer is
    /// dropped runs to its end in a task spawned then.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        record: &Record,
        insert: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> StoreFuture<'static, T> {
        let inserts = self.clone();
        let (key, owner_token) = (record.key.clone(), record.owner_token.clone());
        Box::pin(async move {
            Finishing {
                insert: Some(Box::pin(insert)),
                running: Some(inserts.register((key, owner_token))),
                runtime: tokio::runtime::Handle::current(),
            }
            .await
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

/// An insert polled by its caller, finished in a task of its own if the
/// caller drops it before it has ended.
struct Finishing<F: Future + Send + 'static> {
    /// The insert, until it has ended.
    insert: Option<Pin<Box<F>>>,
    /// Its registration, dropped when it has ended.
    running: Option<Running>,
    /// The runtime the insert started in, to finish it in.
    runtime: tokio::runtime::Handle,
}

impl<F: Future + Send + 'static> Future for Finishing<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let Some(insert) = this.insert.as_mut() else {
            return Poll::Pending; // not polled again after it answered
        };
        let answer = ready!(insert.as_mut().poll(cx));
        this.insert = None;
        this.running = None;
        Poll::Ready(answer)
    }
}

impl<F: Future + Send + 'static> Drop for Finishing<F> {
    fn drop(&mut self) {
        if let Some(insert) = self.insert.take() {
            let running = self.running.take();
            self.runtime.spawn(async move {
                let _ = insert.await;
                drop(running);
            });
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

    /// Runs `test` on a runtime of its own: one thread, or two workers.
    fn block_on<F: Future>(workers: usize, test: F) -> F::Output {
        let runtime = if workers == 1 {
            tokio::runtime::Builder::new_current_thread()
        } else {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(workers);
            b
        }
        .enable_all()
        .build()
        .unwrap();
        runtime.block_on(test)
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
        block_on(1, async {
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

    #[test]
    fn an_insert_whose_answer_is_dropped_runs_to_its_end() {
        block_on(2, async {
            let inserts = Inserts::default();
            // The statement: it goes on until the server answers (the gate opens).
            let (open, gate) = tokio::sync::oneshot::channel::<()>();
            let (done, inserted) = tokio::sync::oneshot::channel::<()>();
            let answer = inserts.run(&record("t1"), async move {
                let _ = gate.await;
                let _ = done.send(());
                Ok(true)
            });
            // The caller gives up at its deadline: the answer is dropped mid-way.
            let waited = tokio::time::timeout(Duration::from_millis(30), answer).await;
            assert!(
                waited.is_err(),
                "the insert was still running at the deadline"
            );
            let waiting =
                tokio::time::timeout(Duration::from_millis(30), inserts.settled(&release("t1")))
                    .await;
            assert!(
                waiting.is_err(),
                "the release waits for the abandoned insert"
            );
            open.send(()).unwrap();
            tokio::time::timeout(Duration::from_secs(1), inserted)
                .await
                .expect("the abandoned insert ran to its end")
                .expect("and answered");
            tokio::time::timeout(Duration::from_secs(1), inserts.settled(&release("t1")))
                .await
                .expect("the release goes on once it has ended");
            assert!(inserts.lock().is_empty(), "nothing is left registered");
        });
    }

    #[test]
    fn an_insert_answers_its_caller() {
        block_on(1, async {
            let inserts = Inserts::default();
            let answer = inserts.run(&record("t1"), async { Ok(7_u32) });
            assert_eq!(answer.await.unwrap(), 7);
            assert!(inserts.lock().is_empty(), "nothing is left registered");
        });
    }
}

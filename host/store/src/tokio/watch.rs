//! Wake-ups for retries that wait for the first attempt (the core's
//! `Op::Watch`): one registry per process, keyed by record key.
//!
//! A store's own write that changed a record (completion, release,
//! recovery write) wakes the waiters of its key at once; a store with
//! notifications from other processes (PostgreSQL `LISTEN`) feeds the same
//! registry from its one listening connection. A wake-up for a key that
//! another store in the process also holds only makes that waiter claim
//! again one interval early: harmless. A waiter that misses a wake-up (it
//! came between its claim and its watch, or from a process that does not
//! notify) re-checks at the end of the core's interval.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

static WATCHERS: LazyLock<Mutex<HashMap<String, Arc<Notify>>>> = LazyLock::new(Default::default);

/// Wakes every waiter of `key` in this process.
pub fn changed(key: &str) {
    let map = WATCHERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(notify) = map.get(key) {
        notify.notify_waiters();
    }
}

/// How many keys have waiters now (for tests: a cancelled wait leaves none).
pub fn watched_keys() -> usize {
    WATCHERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .len()
}

/// Removes the entry of a key when its last waiter leaves (also when the
/// waiting future is dropped: a client that disconnected).
struct Registration {
    key: String,
    notify: Arc<Notify>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut map = WATCHERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The map's reference and this one: no other waiter.
        if Arc::strong_count(&self.notify) <= 2 {
            map.remove(&self.key);
        }
    }
}

/// Waits until [`changed`] is called for `key` or `ms` milliseconds pass.
pub async fn until_changed(key: String, ms: u32) {
    let notify = {
        let mut map = WATCHERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(map.entry(key.clone()).or_default())
    };
    let registration = Registration { key, notify };
    // A `Notified` hears `notify_waiters` from the moment it is made.
    let notified = registration.notify.notified();
    tokio::select! {
        () = notified => {}
        () = tokio::time::sleep(Duration::from_millis(u64::from(ms))) => {}
    }
    drop(registration);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_change_wakes_the_waiter_before_its_pause_ends() {
        let started = tokio::time::Instant::now();
        let waiter = tokio::spawn(until_changed("wk-1".into(), 5_000));
        tokio::time::sleep(Duration::from_millis(10)).await;
        changed("wk-1");
        waiter.await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(100));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn another_keys_change_does_not_and_the_entry_goes_with_the_waiter() {
        let started = tokio::time::Instant::now();
        let waiter = tokio::spawn(until_changed("wk-2".into(), 300));
        tokio::time::sleep(Duration::from_millis(10)).await;
        changed("wk-other");
        waiter.await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(300));
        let cancelled = tokio::spawn(until_changed("wk-3".into(), 60_000));
        tokio::time::sleep(Duration::from_millis(10)).await;
        cancelled.abort();
        let _ = cancelled.await;
        let map = WATCHERS.lock().unwrap();
        assert!(!map.contains_key("wk-2") && !map.contains_key("wk-3"));
    }
}

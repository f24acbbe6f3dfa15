//! Faults between the app and the store (PostgreSQL, Redis), through a TCP
//! proxy the test controls: 16 retrying clients send new keys (4 more from
//! the blackhole's start, so that requests are sent during it whatever phase
//! the first 16 were in) while the proxy blackholes the network (the
//! statements reach the server and commit, no answer comes back, no RST; new
//! connections hang) and then resets every connection. The checks: no
//! handler runs twice; no key is left in flight whose handler never ran (a
//! claim whose answer was lost is released by its owner once the store
//! answers again, after its own statement has ended: the retries of one key
//! overlap, and a claim still running may commit after an earlier claim's
//! release); during the blackhole every answer comes within the store
//! deadline (503), never a hang. It prints the answers per second around
//! the faults.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../../store/tests/common/redis_db.rs"]
mod redis_db;
mod support;
use support::common;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post as route_post;
use axum::{Extension, Router};
use intentkey::claim::Status;
use intentkey::http::{Options, Profile};
use intentkey::Secret;
use intentkey_axum::{AsyncStore, Blocking, Idempotency, IdempotencyLayer, PgStore};
use intentkey_store::RedisStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A TCP proxy that can stop passing bytes (a blackhole) and reset every
/// connection it holds.
struct Proxy {
    addr: SocketAddr,
    blackhole: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let blackhole = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (hole, conns) = (Arc::clone(&blackhole), Arc::clone(&connections));
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let hole = Arc::clone(&hole);
                let task = tokio::spawn(async move {
                    // A connection opened during a blackhole hangs too.
                    while hole.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_zero_linger();
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    // The requests go through (and commit); the answers are
                    // held: a claim committed whose answer is lost.
                    let open = Arc::new(AtomicBool::new(false));
                    tokio::join!(pipe(cr, sw, open), pipe(sr, cw, hole));
                });
                conns.lock().unwrap().push(task);
            }
        });
        Proxy {
            addr,
            blackhole,
            connections,
        }
    }

    /// Drops every connection (the client side with SO_LINGER 0: an RST).
    fn reset(&self) {
        for task in self.connections.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

/// Copies bytes one way, holding them while the blackhole lasts.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    hole: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while hole.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The effect: how many times each storage key's handler ran.
type Effects = Arc<Mutex<HashMap<String, u32>>>;

async fn handler(
    Extension(effects): Extension<Effects>,
    Extension(idempotency): Extension<Idempotency>,
    _body: Bytes,
) -> Response {
    *effects.lock().unwrap().entry(idempotency.key).or_default() += 1;
    (StatusCode::CREATED, "ok").into_response()
}

/// One answer as a client saw it: when (ms since the start), status (0: a
/// connection error or the client's own 5 s timeout), and how long it took.
#[derive(Clone, Copy, Debug)]
struct Seen {
    client: usize,
    sent_ms: u64,
    at_ms: u64,
    status: u16,
    took: Duration,
}

const DEADLINE: Duration = Duration::from_millis(1_000);
/// Clients from the start, and clients that start when the blackhole begins.
const CLIENTS: usize = 16;
const LATE_CLIENTS: usize = 4;
const BLACKHOLE_AT: Duration = Duration::from_secs(2);
const BLACKHOLE_FOR: Duration = Duration::from_secs(4);
const RUN_FOR: Duration = Duration::from_secs(10);

#[test]
fn a_blackhole_and_a_reset_between_the_app_and_postgresql() {
    support::on_postgres("axum_faults", |url| async move {
        let proxy = Proxy::start("127.0.0.1:5432".parse().unwrap()).await;
        let proxied = url.replacen("127.0.0.1:5432", &proxy.addr.to_string(), 1);
        assert_ne!(proxied, url, "the URL goes through the proxy");
        let store: Arc<dyn AsyncStore> = Arc::new(PgStore::connect(&proxied, 8).await.unwrap());
        let direct: Arc<dyn AsyncStore> = Arc::new(PgStore::connect(&url, 2).await.unwrap());
        faults("postgres", &proxy, store, direct).await;
    });
}

#[test]
fn a_blackhole_and_a_reset_between_the_app_and_redis() {
    let Some(prefix) = redis_db::RedisPrefix::new("axum-faults") else {
        return;
    };
    let url = prefix.url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let proxy = Proxy::start("127.0.0.1:6379".parse().unwrap()).await;
        let proxied = url.replacen("127.0.0.1:6379", &proxy.addr.to_string(), 1);
        assert_ne!(proxied, url, "the URL goes through the proxy");
        let store: Arc<dyn AsyncStore> =
            Arc::new(Blocking::new(RedisStore::connect(&proxied).unwrap()));
        let direct: Arc<dyn AsyncStore> =
            Arc::new(Blocking::new(RedisStore::connect(&url).unwrap()));
        faults("redis", &proxy, store, direct).await;
    });
}

/// 16 retrying clients through `proxy` to `store`, a blackhole and a reset;
/// `direct` reads the records past the proxy afterwards.
async fn faults(
    name: &str,
    proxy: &Proxy,
    store: Arc<dyn AsyncStore>,
    direct: Arc<dyn AsyncStore>,
) {
    {
        let effects: Effects = Arc::default();
        let errors = Arc::new(AtomicU64::new(0));
        let layer = IdempotencyLayer::with_shared_store(
            Secret::new([9u8; 32]).unwrap(),
            Options::new(Profile::Ietf),
            store,
        )
        .store_deadline(DEADLINE)
        .on_error({
            let errors = Arc::clone(&errors);
            move |phase, message| {
                if errors.fetch_add(1, Ordering::Relaxed) < 400
                    && std::env::var("FAULTS_DEBUG").is_ok()
                {
                    eprintln!("on_error {phase:?}: {message}");
                }
            }
        });
        let app = Router::new()
            .route("/pay", route_post(handler))
            .layer(layer)
            .layer(Extension(Arc::clone(&effects)));
        let addr = support::serve(app).await;

        let start = Instant::now();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let client = |c: usize| {
            let (seen, stop) = (Arc::clone(&seen), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut n = 0u32;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let key = format!("c{c}-{n}-{}", support::common::rand_u32());
                    // Retry one key until it is answered 201 (or the run ends).
                    loop {
                        let sent = Instant::now();
                        let sent_ms = start.elapsed().as_millis() as u64;
                        let answer = tokio::time::timeout(
                            Duration::from_secs(5),
                            support::post_once(addr, "/pay", &[("Idempotency-Key", &key)], "{}"),
                        )
                        .await;
                        let status = match answer {
                            Ok(Ok(a)) => a.status,
                            _ => 0,
                        };
                        seen.lock().unwrap().push(Seen {
                            client: c,
                            sent_ms,
                            at_ms: start.elapsed().as_millis() as u64,
                            status,
                            took: sent.elapsed(),
                        });
                        if status == 201 || stop.load(Ordering::SeqCst) {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            })
        };
        let mut clients: Vec<_> = (0..CLIENTS).map(client).collect();

        tokio::time::sleep(BLACKHOLE_AT).await;
        proxy.blackhole.store(true, Ordering::SeqCst);
        // Clients whose requests were completing wait through the core's
        // completion retries; these send their first requests in the blackhole.
        clients.extend((CLIENTS..CLIENTS + LATE_CLIENTS).map(client));
        tokio::time::sleep(BLACKHOLE_FOR).await;
        proxy.reset();
        proxy.blackhole.store(false, Ordering::SeqCst);
        tokio::time::sleep(RUN_FOR - BLACKHOLE_AT - BLACKHOLE_FOR).await;
        stop.store(true, Ordering::SeqCst);
        for c in clients {
            c.await.unwrap();
        }

        // Background releases finish once the store answers (a few seconds at most).
        let mut never_ran = Vec::new();
        for _ in 0..50 {
            let in_flight = direct.list(Some(Status::InFlight), 10_000).await.unwrap();
            never_ran = {
                let ran = effects.lock().unwrap();
                in_flight
                    .iter()
                    .filter(|r| !ran.contains_key(&r.key))
                    .map(|r| r.key.clone())
                    .collect()
            };
            if never_ran.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        // Each such record's owner token, to match the releases logged
        // with FAULTS_DEBUG=1.
        let mut left = Vec::new();
        for k in &never_ran {
            if let Some(r) = direct.get(k.clone()).await.unwrap() {
                left.push(format!(
                    "{} (owner {}, claimed at {})",
                    r.key, r.owner_token, r.created_at
                ));
            }
        }
        let seen = seen.lock().unwrap().clone();
        let ran = effects.lock().unwrap().clone();
        let twice = ran.values().filter(|&&n| n > 1).count();
        let hole =
            BLACKHOLE_AT.as_millis() as u64..(BLACKHOLE_AT + BLACKHOLE_FOR).as_millis() as u64;
        // Requests sent during the blackhole and answered before its end.
        let in_hole: Vec<&Seen> = seen
            .iter()
            .filter(|s| hole.contains(&s.sent_ms) && hole.contains(&s.at_ms))
            .collect();
        let slowest_in_hole = in_hole.iter().map(|s| s.took).max().unwrap_or_default();
        let hung = seen.iter().filter(|s| s.status == 0).count();

        println!(
            "faults ({name}): {} requests, {} handlers ran, {} store errors reported",
            seen.len(),
            ran.len(),
            errors.load(Ordering::Relaxed)
        );
        println!("faults ({name}): per second: answers (201 / 503 / 409 / other / no answer)");
        let mut per_second: BTreeMap<u64, [u32; 5]> = BTreeMap::new();
        for s in &seen {
            let slot = match s.status {
                201 => 0,
                503 => 1,
                409 => 2,
                0 => 4,
                _ => 3,
            };
            per_second.entry(s.at_ms / 1000).or_default()[slot] += 1;
        }
        for (second, counts) in &per_second {
            println!("faults ({name}): {second:>3} s  {counts:?}");
        }
        println!("faults ({name}): slowest answer during the blackhole: {slowest_in_hole:?}; answers with no status: {hung}");

        assert_eq!(twice, 0, "no handler ran twice");
        assert!(
            never_ran.is_empty(),
            "keys left in flight whose handler never ran: {left:?}"
        );
        assert!(
            !in_hole.is_empty(),
            "requests were answered during the blackhole"
        );
        for c in CLIENTS..CLIENTS + LATE_CLIENTS {
            let first = seen.iter().find(|s| s.client == c);
            assert!(
                first.is_some_and(|s| s.status == 503 && s.took < DEADLINE * 3),
                "a client started in the blackhole: its first answer 503 at the deadline: {first:?}"
            );
        }
        assert!(
            in_hole.iter().all(|s| s.status == 503),
            "during the blackhole every answer is 503: {:?}",
            in_hole.iter().map(|s| s.status).collect::<Vec<_>>()
        );
        assert!(
            slowest_in_hole < DEADLINE * 3,
            "answers within the deadline, not hangs: {slowest_in_hole:?}"
        );
        assert_eq!(hung, 0, "every request got an answer");
        let after = seen
            .iter()
            .filter(|s| s.at_ms > (BLACKHOLE_AT + BLACKHOLE_FOR).as_millis() as u64 + 1_500);
        assert!(
            after.clone().any(|s| s.status == 201),
            "it recovers after the faults"
        );
    }
}

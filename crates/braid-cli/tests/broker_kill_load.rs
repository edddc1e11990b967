//! kill -9 under load (issue 14's acceptance line): 64 concurrent clients
//! hold and commit against a real `braid broker` process (single
//! reservations and two-resource co-reservations); the broker is killed
//! with SIGKILL in the middle, restarted on the same database, and then:
//! every reservation a client was told is committed is there and
//! committed; every one it was told is held (and whose commit it never
//! sent) is held or timed out; every co-reservation's parts are in one
//! state (none half-written); and the stored reservations, replayed into a
//! fresh braid-core `Book` and summed at every instant, never exceed a
//! resource's capacity. On SQLite always, and on PostgreSQL when
//! `BRAID_TEST_POSTGRES` names a reachable server (skipped with a printed
//! reason otherwise). Prints the counts (docs/BENCHMARKS.md, "Issue 14:
//! kill -9 under load").

use braid_broker::owner::Action;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use braid_broker::client::ClientError;
use braid_broker::store::Store;
use braid_broker::types::CreateRequest;
use braid_broker::{Auth, Client, Config, Role};
use braid_core::reserve::{Book, BookConfig, ReservationState};
use sqlx::Connection as _;

mod common;

/// Starts a broker on an ephemeral port; returns it and its URL.
fn start(config: &Path, db: &str) -> (Child, String) {
    common::broker::start(&[], config, db)
}
const SECRET: &str = "0123456789abcdef0123456789abcdef";
/// Concurrent clients.
const CLIENTS: usize = 64;
/// Commits answered before the kill.
const KILL_AFTER: usize = 400;
/// The most rounds one client runs (the kill comes long before).
const MAX_ROUNDS: usize = 10_000;
/// Every wait in this test is bounded by this.
const BOUND: std::time::Duration = std::time::Duration::from_secs(120);

const CONFIG: &str = "[[resource]]\nname = \"wide\"\nkind = \"network\"\ncapacity = \"10gbit\"\n\
    [[resource]]\nname = \"tight\"\nkind = \"network\"\ncapacity = \"20mbit\"\n";

/// What one client saw answered.
#[derive(Default)]
struct Seen {
    /// Created (held); the parts of each request.
    held: Vec<Vec<u64>>,
    /// Told committed.
    committed: Vec<Vec<u64>>,
    /// A commit sent but not answered (the kill came): either outcome.
    unanswered: Vec<Vec<u64>>,
    /// Refused for capacity.
    refused: usize,
}

/// Counts answered commits and wakes the test at [`KILL_AFTER`].
struct Progress {
    done: AtomicUsize,
    reached: tokio::sync::Notify,
}

async fn client_loop(client: Client, c: usize, end: String, progress: Arc<Progress>) -> Seen {
    let mut seen = Seen::default();
    for i in 0..MAX_ROUNDS {
        let mut req = CreateRequest {
            rate: Some("100kbit".into()),
            end: Some(end.clone()),
            ..CreateRequest::default()
        };
        if (c + i) % 8 == 0 {
            req.resources = Some(vec!["wide".into(), "tight".into()]);
        } else if i % 3 == 0 {
            req.resource = Some("tight".into());
        } else {
            req.resource = Some("wide".into());
        }
        let made = match client.create(&req).await {
            Ok(m) => m,
            Err(ClientError::Api { status, .. }) if status.as_u16() == 409 => {
                seen.refused += 1;
                continue;
            }
            Err(ClientError::Api { status, error, .. }) => {
                panic!("unexpected refusal {status}: {error}")
            }
            // The broker is gone.
            Err(_) => break,
        };
        // Every other one is left held (its commit never sent).
        if i % 2 == 1 {
            seen.held.push(made.ids);
            continue;
        }
        match client.act(made.id, Action::Commit).await {
            Ok(v) => {
                assert_eq!(v.state, "committed");
                seen.committed.push(made.ids);
                if progress.done.fetch_add(1, Ordering::Relaxed) + 1 == KILL_AFTER {
                    progress.reached.notify_one();
                }
            }
            Err(ClientError::Api { status, error, .. }) => {
                panic!("commit of a held reservation refused {status}: {error}")
            }
            Err(_) => {
                seen.unanswered.push(made.ids);
                break;
            }
        }
    }
    seen
}

/// A fresh PostgreSQL database URL on the server `BRAID_TEST_POSTGRES`
/// names, and the server's URL (to drop it after).
async fn postgres() -> Result<(String, String, String), String> {
    let server = std::env::var("BRAID_TEST_POSTGRES")
        .map_err(|_| "set BRAID_TEST_POSTGRES=postgres://… to run it there too".to_string())?;
    let name = format!("braid_broker2_kill_{}", std::process::id());
    let mut c = sqlx::PgConnection::connect(&server)
        .await
        .map_err(|e| format!("no PostgreSQL at BRAID_TEST_POSTGRES ({e})"))?;
    for sql in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        sqlx::raw_sql(&sql)
            .execute(&mut c)
            .await
            .map_err(|e| format!("cannot create a test database ({e})"))?;
    }
    let _ = c.close().await;
    let (base, query) = server.split_once('?').unwrap_or((&server, ""));
    let at = base.find("://").map_or(0, |i| i + 3);
    let end = base[at..].find('/').map_or(base.len(), |i| at + i);
    let mut url = format!("{}/{name}", &base[..end]);
    if !query.is_empty() {
        url.push('?');
        url.push_str(query);
    }
    Ok((url, server, name))
}

#[test]
fn kill_9_under_load_loses_nothing_answered() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("broker.db");
    rt.block_on(run(dir.path(), sqlite.to_str().unwrap(), "sqlite"));
    match rt.block_on(postgres()) {
        Ok((url, server, name)) => {
            rt.block_on(run(dir.path(), &url, "postgres"));
            rt.block_on(async {
                if let Ok(mut c) = sqlx::PgConnection::connect(&server).await {
                    let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&mut c)
                        .await;
                }
            });
        }
        Err(why) => eprintln!("skipped on PostgreSQL: {why}"),
    }
}

async fn run(dir: &Path, db: &str, kind: &str) {
    let config = dir.join(format!("{kind}.toml"));
    std::fs::write(&config, format!("secret = \"{SECRET}\"\n{CONFIG}")).unwrap();
    let auth = Auth::new(SECRET.as_bytes());
    let (mut broker, url) = start(&config, db);
    let end = braid_broker::clock::format(
        braid_broker::clock::now() + braid_core::Duration::from_secs(3600),
    );
    let progress = Arc::new(Progress {
        done: AtomicUsize::new(0),
        reached: tokio::sync::Notify::new(),
    });
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let token = auth
            .issue(&format!("user{c}"), Role::User, 4_000_000_000)
            .unwrap();
        let client = Client::new(&url, &token).unwrap();
        tasks.push(tokio::spawn(client_loop(
            client,
            c,
            end.clone(),
            progress.clone(),
        )));
    }
    // Once enough commits were answered (bounded wait), SIGKILL.
    tokio::time::timeout(BOUND, progress.reached.notified())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{kind}: only {} commits within the bound",
                progress.done.load(Ordering::Relaxed)
            )
        });
    broker.kill().unwrap(); // SIGKILL, with requests in flight
    broker.wait().unwrap();
    let mut seen = Seen::default();
    for t in tasks {
        let s = tokio::time::timeout(BOUND, t)
            .await
            .expect("clients stop once the broker is gone")
            .expect("client task");
        seen.held.extend(s.held);
        seen.committed.extend(s.committed);
        seen.unanswered.extend(s.unanswered);
        seen.refused += s.refused;
    }

    // Restart on the same database: it restores (replaying every stored
    // reservation through its book's admission) and answers.
    let (mut broker, url) = start(&config, db);
    let op = Client::new(
        &url,
        &auth.issue("ops", Role::Operator, 4_000_000_000).unwrap(),
    )
    .unwrap();
    let all: BTreeMap<u64, braid_broker::types::ReservationView> = op
        .list(true)
        .await
        .expect("list after restart")
        .into_iter()
        .map(|v| (v.id, v))
        .collect();
    let state = |id: &u64| all.get(id).map_or("missing", |v| v.state.as_str());
    for parts in &seen.committed {
        for id in parts {
            assert_eq!(state(id), "committed", "{kind}: told committed: {id}");
            assert_eq!(all[id].life, "created", "{kind}: {id}");
        }
    }
    for parts in &seen.held {
        for id in parts {
            assert!(
                matches!(state(id), "held" | "timed_out"),
                "{kind}: told held, never committed: {id} is {}",
                state(id)
            );
        }
    }
    for parts in &seen.unanswered {
        for id in parts {
            assert!(
                matches!(state(id), "held" | "timed_out" | "committed"),
                "{kind}: commit unanswered: {id} is {}",
                state(id)
            );
        }
    }
    let mut groups = 0;
    for parts in seen
        .held
        .iter()
        .chain(&seen.committed)
        .chain(&seen.unanswered)
    {
        if parts.len() > 1 {
            groups += 1;
            let first = state(&parts[0]);
            assert!(
                parts.iter().all(|p| state(p) == first),
                "{kind}: a co-reservation half-written: {:?}",
                parts.iter().map(|p| (p, state(p))).collect::<Vec<_>>()
            );
        }
    }
    broker.kill().unwrap();
    broker.wait().unwrap();

    // Replay the stored rows into a fresh braid-core book (admission
    // refuses any over-admission) and sum by hand at every start instant.
    let store = Store::open(db).await.unwrap();
    let stored = store.all(None, i64::MAX).await.unwrap();
    store.close().await;
    let parsed = Config::parse(&format!("secret = \"{SECRET}\"\n{CONFIG}"), &config).unwrap();
    let mut book = Book::new(BookConfig::default());
    for r in &parsed.resources {
        book.add_resource(&r.name, r.capacity).unwrap();
    }
    for r in &stored {
        book.restore(r.clone())
            .unwrap_or_else(|e| panic!("{kind}: stored {} does not replay: {e}", r.id.0));
    }
    for r in &parsed.resources {
        let pieces: Vec<(u64, u64, u64)> = stored
            .iter()
            .filter(|s| s.resource == r.name && s.life.is_created())
            .filter(|s| {
                matches!(
                    s.state,
                    ReservationState::Committed | ReservationState::Held
                )
            })
            .flat_map(|s| s.committed.iter().chain(s.pending.iter()))
            .map(|v| (v.start.as_nanos(), v.end.as_nanos(), v.rate.bps()))
            .collect();
        for &(t, _, _) in &pieces {
            let used: u64 = pieces
                .iter()
                .filter(|p| p.0 <= t && t < p.1)
                .map(|p| p.2)
                .sum();
            assert!(
                used <= r.capacity.bps(),
                "{kind}: {} over-admitted at {t}: {used}",
                r.name
            );
        }
    }
    let count = |v: &Vec<Vec<u64>>| v.iter().map(Vec::len).sum::<usize>();
    println!(
        "{kind}: {CLIENTS} clients, SIGKILL after {} commits answered: {} reservations stored; \
         {} told committed all committed, {} told held all held or timed out, \
         {} with a commit unanswered, {groups} co-reservations none half-written, \
         {} refused for capacity; replayed: no over-admission",
        progress.done.load(Ordering::Relaxed),
        stored.len(),
        count(&seen.committed),
        count(&seen.held),
        count(&seen.unanswered),
        seen.refused,
    );
}

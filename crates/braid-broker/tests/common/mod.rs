//! The databases a broker test runs against: a fresh SQLite file always,
//! and a fresh PostgreSQL database when `BRAID_TEST_POSTGRES` names a
//! reachable server (e.g. `postgres://braid:braid@localhost/braid_test`; the
//! role needs CREATEDB). Without one the PostgreSQL run is skipped with a
//! printed reason. Each test gets its own database, dropped by
//! [`TestDb::finish`], so tests never see each other's reservations.

use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::Connection as _;

/// The variable naming the PostgreSQL server to test against.
const POSTGRES_VAR: &str = "BRAID_TEST_POSTGRES";

/// Distinguishes the databases of one test binary (tests run in parallel).
static NEXT: AtomicU32 = AtomicU32::new(0);

/// One database for one test.
pub struct TestDb {
    url: String,
    /// Keeps the SQLite file's directory alive.
    _dir: Option<tempfile::TempDir>,
    /// PostgreSQL: the server's URL and the database created on it.
    created: Option<(String, String)>,
}

impl TestDb {
    /// What `Store::open` and `Broker::start` take.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Which back-end, for assertion messages.
    pub fn kind(&self) -> &'static str {
        if self.created.is_some() {
            "postgres"
        } else {
            "sqlite"
        }
    }

    /// Drops the PostgreSQL database (best effort); the SQLite file goes
    /// with its directory.
    pub async fn finish(self) {
        if let Some((server, name)) = &self.created {
            if let Ok(mut c) = sqlx::PgConnection::connect(server).await {
                let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut c)
                    .await;
                let _ = c.close().await;
            }
        }
    }
}

/// SQLite, then PostgreSQL if reachable.
pub async fn backends() -> Vec<TestDb> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("broker.db");
    let mut dbs = vec![TestDb {
        url: path.to_str().expect("utf-8 temporary path").to_string(),
        _dir: Some(dir),
        created: None,
    }];
    match postgres().await {
        Ok(db) => dbs.push(db),
        Err(why) => eprintln!("skipped on PostgreSQL: {why}"),
    }
    dbs
}

/// A fresh database on the server `BRAID_TEST_POSTGRES` names.
async fn postgres() -> Result<TestDb, String> {
    let server = std::env::var(POSTGRES_VAR)
        .map_err(|_| format!("set {POSTGRES_VAR}=postgres://… to run these tests there too"))?;
    let name = format!(
        "braid_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut c = sqlx::PgConnection::connect(&server)
        .await
        .map_err(|e| format!("no PostgreSQL at {POSTGRES_VAR} ({e})"))?;
    // Two statements: CREATE DATABASE refuses to run in the implicit
    // transaction of a multi-statement query.
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
    Ok(TestDb {
        url: with_database(&server, &name),
        _dir: None,
        created: Some((server, name)),
    })
}

/// `url` with its database (the path) replaced by `name`, query kept.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    let mut out = format!("{}/{name}", &base[..authority_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

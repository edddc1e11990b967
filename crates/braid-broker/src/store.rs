//! Storage: every reservation the broker has made, one row each, in SQLite
//! (a file path; bundled, WAL) or PostgreSQL (`postgres://…`), through one
//! `sqlx` `Any` pool and the same portable SQL.
//!
//! The owner task writes before it replies ([`Store::write`] takes a batch
//! and commits it as one transaction: group commit), so what a client was
//! told is committed survives kill -9. Migrations are embedded SQL files run
//! in order by [`Store::open`] and recorded in `braid_schema`.

use std::collections::BTreeMap;

use braid_core::reserve::Reservation;
use braid_core::ReservationId;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row as _};

use crate::enforce::{Binding, Flow};
use crate::types::RemotePart;

/// How long opening the database may wait for a connection.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// The migrations, in order: (version, SQL).
/// Append-only: a version once shipped is never edited or renumbered.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_reservations.sql")),
    (2, include_str!("../migrations/0002_flow.sql")),
    (3, include_str!("../migrations/0003_groups.sql")),
    (4, include_str!("../migrations/0004_operator.sql")),
];

/// The PostgreSQL advisory lock key held while migrating ("braid" in
/// ASCII, so it does not collide with another application's small keys).
pub const MIGRATION_LOCK: i64 = 0x0062_7261_6964;

/// Runs the migrations not yet recorded in `braid_schema`, each in its own
/// transaction, on `conn`. On SQLite the transaction takes the write lock
/// at its start (`BEGIN IMMEDIATE`): a deferred one that read first could
/// not upgrade while another broker migrates, and SQLite answers that
/// deadlock with "database is locked" at once instead of waiting.
async fn migrate_on(conn: &mut sqlx::AnyConnection, postgres: bool) -> Result<(), StoreError> {
    use sqlx::Connection as _;
    sqlx::raw_sql("CREATE TABLE IF NOT EXISTS braid_schema (version BIGINT PRIMARY KEY)")
        .execute(&mut *conn)
        .await?;
    for &(version, sql) in MIGRATIONS {
        let mut tx = if postgres {
            conn.begin().await?
        } else {
            conn.begin_with("BEGIN IMMEDIATE").await?
        };
        let done: Option<AnyRow> =
            sqlx::query("SELECT version FROM braid_schema WHERE version = $1")
                .bind(version)
                .fetch_optional(&mut *tx)
                .await?;
        if done.is_none() {
            sqlx::raw_sql(sql).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO braid_schema (version) VALUES ($1)")
                .bind(version)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
    }
    Ok(())
}

/// Connections in the pool: SQLite has one writer, and the owner task is
/// the only user, so one is enough; PostgreSQL gets a few for reads.
const SQLITE_CONNECTIONS: u32 = 1;
/// Connections to PostgreSQL.
const POSTGRES_CONNECTIONS: u32 = 4;

/// A storage failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database refused or failed.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// The database did not answer when it was opened.
    #[error("the database did not answer within {}s", .0.as_secs())]
    NoAnswer(std::time::Duration),
    /// A stored row does not decode.
    #[error("stored reservation {id}: {source}")]
    Corrupt {
        /// The row's id.
        id: i64,
        /// Why.
        source: serde_json::Error,
    },
}

/// One reservation to write, with the callback URL it was made with.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// The book's record.
    pub reservation: &'a Reservation,
    /// Where its state changes are posted, if anywhere.
    pub callback: Option<&'a str>,
    /// What it is enforced on (written when the row is first inserted).
    pub binding: Option<&'a Binding>,
}

/// The broker's database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    postgres: bool,
}

impl Store {
    /// Opens (creating if need be) the database `db`: a `postgres://` or
    /// `postgresql://` URL, or else a SQLite file path; then migrates it.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub async fn open(db: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let postgres = db.starts_with("postgres://") || db.starts_with("postgresql://");
        let (url, connections) = if postgres {
            (db.to_string(), POSTGRES_CONNECTIONS)
        } else {
            (format!("sqlite://{db}?mode=rwc"), SQLITE_CONNECTIONS)
        };
        // A database that does not answer is an error in seconds, not a
        // silent wait of sqlx's default 30 s.
        let pool = AnyPoolOptions::new()
            .max_connections(connections)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect(&url)
            .await
            .map_err(|e| match e {
                sqlx::Error::PoolTimedOut => StoreError::NoAnswer(CONNECT_TIMEOUT),
                e => StoreError::Db(e),
            })?;
        if !postgres {
            // WAL: readers never block the writer; durable at each commit
            // with the default synchronous=FULL.
            sqlx::raw_sql("PRAGMA journal_mode=WAL")
                .execute(&pool)
                .await?;
        }
        let store = Store { pool, postgres };
        store.migrate().await?;
        Ok(store)
    }

    /// Whether this is PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.postgres
    }

    /// Runs the migrations not yet recorded. On PostgreSQL under
    /// `pg_advisory_lock(`[`MIGRATION_LOCK`]`)` on one connection, so two
    /// brokers starting together on one database migrate one after the
    /// other (concurrent `CREATE TABLE IF NOT EXISTS` can fail there);
    /// SQLite serialises writers itself.
    async fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        if self.postgres {
            // `pg_advisory_lock` returns void, which the Any driver does
            // not decode: select a constant beside it.
            sqlx::query("SELECT 1 AS locked FROM (SELECT pg_advisory_lock($1)) AS l")
                .bind(MIGRATION_LOCK)
                .fetch_one(&mut *conn)
                .await?;
        }
        let done = migrate_on(&mut conn, self.postgres).await;
        if self.postgres {
            // Also released when the session ends, should this fail.
            let unlocked =
                sqlx::query("SELECT 1 AS unlocked FROM (SELECT pg_advisory_unlock($1)) AS l")
                    .bind(MIGRATION_LOCK)
                    .fetch_one(&mut *conn)
                    .await;
            if let Err(e) = unlocked {
                // Drop the connection: the lock goes with its session.
                let _ = conn.detach();
                done?;
                return Err(e.into());
            }
        }
        done
    }

    /// Writes `rows` (insert or update) in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Db`]; nothing of the batch is written then.
    pub async fn write(&self, rows: &[Record<'_>]) -> Result<(), StoreError> {
        self.write_batch(rows, &[], &[]).await
    }

    /// Writes `rows`, the new co-reservation `groups` memberships
    /// (part, group) and the new peer `links` (local reservation, its part
    /// at a peer) in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Db`]; nothing of the batch is written then.
    pub async fn write_batch(
        &self,
        rows: &[Record<'_>],
        groups: &[(ReservationId, ReservationId)],
        links: &[(ReservationId, RemotePart)],
    ) -> Result<(), StoreError> {
        if rows.is_empty() && groups.is_empty() && links.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        for (local, part) in links {
            sqlx::query(
                "INSERT INTO peer_parts (local_id, peer, resource, remote_id) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (local_id, peer, resource) DO NOTHING",
            )
            .bind(id_to_db(*local))
            .bind(part.peer.clone())
            .bind(part.resource.clone())
            .bind(id_to_db(ReservationId(part.id)))
            .execute(&mut *tx)
            .await?;
        }
        for &(part, group) in groups {
            sqlx::query(
                "INSERT INTO reservation_groups (reservation_id, group_id) VALUES ($1, $2) \
                 ON CONFLICT (reservation_id) DO NOTHING",
            )
            .bind(id_to_db(part))
            .bind(id_to_db(group))
            .execute(&mut *tx)
            .await?;
        }
        for row in rows {
            let r = row.reservation;
            let body = serde_json::to_string(r).map_err(|source| StoreError::Corrupt {
                id: id_to_db(r.id),
                source,
            })?;
            let flow = row
                .binding
                .and_then(|b| b.flow.as_ref())
                .map(serde_json::to_string)
                .transpose()
                .map_err(|source| StoreError::Corrupt {
                    id: id_to_db(r.id),
                    source,
                })?;
            let pid = row.binding.and_then(|b| b.pid).map(i64::from);
            sqlx::query(
                "INSERT INTO reservations (id, owner_user, owner_domain, resource, live, callback, body, flow, pid) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (id) DO UPDATE SET live = excluded.live, body = excluded.body",
            )
            .bind(id_to_db(r.id))
            .bind(r.owner.user.as_str())
            .bind(r.owner.domain.as_str())
            .bind(r.resource.as_str())
            .bind(i64::from(r.life.is_created()))
            .bind(row.callback.map(str::to_string))
            .bind(body)
            .bind(flow)
            .bind(pid)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Every live reservation (life not over), with its callback.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn live(&self) -> Result<Vec<(Reservation, Option<String>)>, StoreError> {
        let rows =
            sqlx::query("SELECT id, callback, body FROM reservations WHERE live = $1 ORDER BY id")
                .bind(1_i64)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|row| Ok((decode(row)?, row.try_get::<Option<String>, _>("callback")?)))
            .collect()
    }

    /// The co-reservation groups with a live part: (part, group), by part.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub async fn groups(&self) -> Result<Vec<(ReservationId, ReservationId)>, StoreError> {
        let rows = sqlx::query(
            "SELECT g.reservation_id AS part, g.group_id AS grp FROM reservation_groups g \
             WHERE g.group_id IN (SELECT h.group_id FROM reservation_groups h \
             JOIN reservations r ON r.id = h.reservation_id WHERE r.live = $1) \
             ORDER BY g.reservation_id",
        )
        .bind(1_i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let part: i64 = row.try_get("part")?;
                let group: i64 = row.try_get("grp")?;
                Ok((id_from_db(part), id_from_db(group)))
            })
            .collect()
    }

    /// The parts held at peers of live local reservations.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub async fn peer_parts(&self) -> Result<Vec<(ReservationId, RemotePart)>, StoreError> {
        let rows = sqlx::query(
            "SELECT p.local_id, p.peer, p.resource, p.remote_id FROM peer_parts p \
             JOIN reservations r ON r.id = p.local_id WHERE r.live = $1 ORDER BY p.local_id",
        )
        .bind(1_i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let local: i64 = row.try_get("local_id")?;
                let remote: i64 = row.try_get("remote_id")?;
                Ok((
                    id_from_db(local),
                    RemotePart {
                        peer: row.try_get("peer")?,
                        resource: row.try_get("resource")?,
                        id: id_from_db(remote).0,
                    },
                ))
            })
            .collect()
    }

    /// Sets the operator setting `key` to `value` (JSON), committed before
    /// it returns.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub async fn put_setting(&self, key: &str, value: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO operator_settings (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(key.to_string())
        .bind(value.to_string())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every operator setting: (key, JSON value), by key.
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub async fn settings(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query("SELECT key, value FROM operator_settings ORDER BY key")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("key")?, r.try_get("value")?)))
            .collect()
    }

    /// What each live reservation is enforced on (those with a flow or a
    /// pid).
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn bindings(&self) -> Result<BTreeMap<ReservationId, Binding>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, flow, pid FROM reservations WHERE live = $1 AND (flow IS NOT NULL OR pid IS NOT NULL)",
        )
        .bind(1_i64)
        .fetch_all(&self.pool)
        .await?;
        let mut out = BTreeMap::new();
        for row in &rows {
            let id: i64 = row.try_get("id")?;
            let flow: Option<String> = row.try_get("flow")?;
            let pid: Option<i64> = row.try_get("pid")?;
            let flow: Option<Flow> = flow
                .map(|f| serde_json::from_str(&f))
                .transpose()
                .map_err(|source| StoreError::Corrupt { id, source })?;
            let binding = Binding {
                flow,
                pid: pid.and_then(|p| u32::try_from(p).ok()),
            };
            out.insert(ReservationId(u64::try_from(id).unwrap_or(0)), binding);
        }
        Ok(out)
    }

    /// The reservation `id`, live or finished.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn get(&self, id: ReservationId) -> Result<Option<Reservation>, StoreError> {
        let row = sqlx::query("SELECT id, body FROM reservations WHERE id = $1")
            .bind(id_to_db(id))
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    /// Every reservation, optionally only `user`'s, oldest first, at most
    /// `limit`.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn all(
        &self,
        user: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Reservation>, StoreError> {
        let rows =
            match user {
                Some(u) => sqlx::query(
                    "SELECT id, body FROM reservations WHERE owner_user = $1 ORDER BY id LIMIT $2",
                )
                .bind(u.to_string())
                .bind(limit)
                .fetch_all(&self.pool)
                .await?,
                None => {
                    sqlx::query("SELECT id, body FROM reservations ORDER BY id LIMIT $1")
                        .bind(limit)
                        .fetch_all(&self.pool)
                        .await?
                }
            };
        rows.iter().map(decode).collect()
    }

    /// The highest id ever stored (0 when none).
    ///
    /// # Errors
    /// [`StoreError::Db`].
    pub async fn max_id(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT MAX(id) AS m FROM reservations")
            .fetch_one(&self.pool)
            .await?;
        let m: Option<i64> = row.try_get("m")?;
        Ok(m.map_or(0, |m| u64::try_from(m).unwrap_or(0)))
    }

    /// Closes the pool (pending writes finish first).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Ids are stored as BIGINT; the book hands them out from 1 upwards, far
/// below `i64::MAX`.
fn id_to_db(id: ReservationId) -> i64 {
    i64::try_from(id.0).unwrap_or(i64::MAX)
}

/// The inverse of [`id_to_db`]; a negative id (never written) reads as 0.
fn id_from_db(id: i64) -> ReservationId {
    ReservationId(u64::try_from(id).unwrap_or(0))
}

fn decode(row: &AnyRow) -> Result<Reservation, StoreError> {
    let id: i64 = row.try_get("id")?;
    let body: String = row.try_get("body")?;
    serde_json::from_str(&body).map_err(|source| StoreError::Corrupt { id, source })
}

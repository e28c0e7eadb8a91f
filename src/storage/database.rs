//! The handle every caller queries through: the pool, plus what a transaction pooler in front of Postgres requires.
//!
//! Directly connected, `Database` is the pool and nothing more. Behind PgBouncer in transaction mode
//! (`DATABASE_PGBOUNCER`), a server connection belongs to a client only inside a transaction: between two
//! `ReadyForQuery` answers outside one, PgBouncer may hand the next message to another server connection. sqlx sends
//! an unnamed statement as Parse/Describe/Sync and then Bind/Execute/Sync, so outside a transaction the Bind could
//! reach a server connection where another client's statement was parsed last. There, every statement sent
//! through `Database` runs in a transaction of its own, and every transaction starts with the timeouts that a
//! direct connection sets once per session (PgBouncer refuses those as startup parameters).

use futures_util::{FutureExt, StreamExt, TryFutureExt, TryStreamExt, stream};
use sqlx::postgres::{PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{AssertSqlSafe, Either, Execute, Executor, PgPool, Postgres, SqlStr, Transaction};
use std::sync::Arc;

use crate::sealing::Sealer;

/// The pool and how transactions begin on it; cheap to clone.
#[derive(Debug, Clone)]
pub struct Database {
    pool: PgPool,
    /// Behind a transaction pooler: the statement that begins every transaction, setting its timeouts.
    pooled_begin: Option<Arc<str>>,
    /// The keys payloads are sealed with before they are stored (docs/design.md §11); none by default.
    sealer: Arc<Sealer>,
}

impl Database {
    /// A pool connected straight to Postgres, whose sessions carry their own settings.
    pub fn direct(pool: PgPool) -> Self {
        Database {
            pool,
            pooled_begin: None,
            sealer: Arc::default(),
        }
    }

    /// A pool connected through a transaction pooler: `begin` starts each transaction with these local settings.
    pub fn behind_pooler(pool: PgPool, settings: &[(&str, String)]) -> Self {
        let mut begin = String::from("begin");
        for (name, value) in settings {
            // Names and values are constants of this crate (numbers, `off`); nothing here comes from a request.
            begin.push_str(&format!("; set local {name} = '{value}'"));
        }
        Database {
            pool,
            pooled_begin: Some(begin.into()),
            sealer: Arc::default(),
        }
    }

    /// The same handle, sealing payloads with `sealer`'s keys.
    pub fn with_sealer(self, sealer: Sealer) -> Self {
        Database {
            sealer: Arc::new(sealer),
            ..self
        }
    }

    /// The keys payloads are sealed and opened with.
    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// The pool itself, for what needs its own connections (metrics, a listener).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Whether a transaction pooler sits in front.
    pub fn is_behind_pooler(&self) -> bool {
        self.pooled_begin.is_some()
    }

    /// Begins a transaction: a plain `BEGIN`, or behind a pooler one that also sets the transaction's timeouts.
    pub async fn begin(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        match &self.pooled_begin {
            None => self.pool.begin().await,
            Some(begin) => self.pool.begin_with(AssertSqlSafe(begin.to_string())).await,
        }
    }

    /// Runs one statement in a transaction of its own and collects everything it answers.
    async fn in_own_transaction<'q, E>(
        self,
        query: E,
    ) -> Result<Vec<Either<PgQueryResult, PgRow>>, sqlx::Error>
    where
        E: 'q + Execute<'q, Postgres>,
    {
        let mut tx = self.begin().await?;
        let answered: Result<Vec<_>, sqlx::Error> =
            (&mut *tx).fetch_many(query).try_collect().await;
        match answered {
            Ok(answered) => {
                tx.commit().await?;
                Ok(answered)
            }
            Err(error) => {
                // Said at once rather than on the connection's next use, so the pooler frees the server connection.
                let _ = tx.rollback().await;
                Err(error)
            }
        }
    }
}

impl<'c> Executor<'c> for &'c Database {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> futures_util::stream::BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if self.pooled_begin.is_none() {
            return self.pool.fetch_many(query);
        }
        let database = self.clone();
        database
            .in_own_transaction(query)
            .map_ok(|answered| stream::iter(answered.into_iter().map(Ok)))
            .try_flatten_stream()
            .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> futures_util::future::BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if self.pooled_begin.is_none() {
            return self.pool.fetch_optional(query);
        }
        let database = self.clone();
        async move {
            let answered = database.in_own_transaction(query).await?;
            Ok(answered.into_iter().find_map(|answer| match answer {
                Either::Right(row) => Some(row),
                Either::Left(_) => None,
            }))
        }
        .boxed()
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [PgTypeInfo],
    ) -> futures_util::future::BoxFuture<'e, Result<PgStatement, sqlx::Error>>
    where
        'c: 'e,
    {
        self.pool.prepare_with(sql, parameters)
    }

    fn describe<'e>(
        self,
        sql: SqlStr,
    ) -> futures_util::future::BoxFuture<'e, Result<sqlx::Describe<Postgres>, sqlx::Error>>
    where
        'c: 'e,
    {
        self.pool.describe(sql)
    }
}

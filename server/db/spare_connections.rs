//! Pool connections kept by a loop that runs a statement often (the watcher's state writes, a
//! sender's checks), instead of given back to the pool after each: sqlx tests every connection
//! given back with a round trip of its own (a `ping` on release, whatever the pool's options),
//! which doubles what a one-statement step costs.

use std::sync::Mutex;

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};

pub struct SpareConnections {
    pool: PgPool,
    spare: Mutex<Vec<PoolConnection<Postgres>>>,
    /// How many connections are kept at most: as many as steps that run at once, usually, while
    /// the pool keeps the rest for everyone else.
    keep: usize,
}

impl SpareConnections {
    pub fn new(pool: PgPool, keep: usize) -> SpareConnections {
        SpareConnections { pool, spare: Mutex::new(Vec::new()), keep }
    }

    /// A kept connection, or one from the pool when none is spare.
    pub async fn take(&self) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        let spare = self.spare.lock().expect("held connections lock").pop();
        match spare {
            Some(conn) => Ok(conn),
            None => self.pool.acquire().await,
        }
    }

    /// Keeps `conn` for the next [`SpareConnections::take`], unless its statement failed (it may be broken),
    /// enough are kept, or the pool would be left with no connection free nor room to open one:
    /// those go back to the pool. A node's pool is small (`db::POOL_CONNECTIONS`), and a
    /// connection kept while the others are all out would starve every other loop.
    pub fn give_back<T>(&self, conn: PoolConnection<Postgres>, result: &Result<T, sqlx::Error>) {
        let room = self.pool.num_idle() > 0 || self.pool.size() < self.pool.options().get_max_connections();
        let mut spare = self.spare.lock().expect("held connections lock");
        if result.is_ok() && room && spare.len() < self.keep {
            spare.push(conn);
        }
    }
}

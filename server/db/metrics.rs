//! The figures `/metrics` reads from the database when it is scraped.

use sqlx::PgConnection;

pub struct Figures {
    /// This node's agents: (state, provider, count).
    pub agents: Vec<(String, String, i64)>,
    pub pending_messages: i64,
    /// Webhook deliveries: (status, count).
    pub deliveries: Vec<(String, i64)>,
    /// Age of the oldest event still waiting in the webhook outbox; 0 when none waits.
    pub outbox_lag_seconds: f64,
}

pub async fn read(conn: &mut PgConnection, node_id: &str) -> Result<Figures, sqlx::Error> {
    let agents = sqlx::query!(
        r#"SELECT state, provider, count(*) AS "count!" FROM agents WHERE node_id = $1 GROUP BY state, provider"#,
        node_id
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| (r.state, r.provider, r.count))
    .collect();
    let pending_messages = crate::db::messages::count_pending_on_node(&mut *conn, node_id).await?;
    let deliveries = sqlx::query!(r#"SELECT status, count(*) AS "count!" FROM webhook_deliveries GROUP BY status"#)
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(|r| (r.status, r.count))
        .collect();
    let outbox_lag_seconds = sqlx::query_scalar!(
        r#"SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(e.created_at))::float8, 0) AS "lag!"
           FROM webhook_outbox o JOIN events e ON e.id = o.event_id"#
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(Figures { agents, pending_messages, deliveries, outbox_lag_seconds })
}

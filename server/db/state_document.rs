//! What the `state.json` export reads that no other module reads: the first enabled webhook URL
//! subscribed to each of multiclaude's hook names.

use sqlx::PgConnection;

/// `(hook name, url)` for each hook name some enabled subscription lists, oldest subscription first.
pub async fn hook_urls(conn: &mut PgConnection) -> Result<Vec<(String, String)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT DISTINCT ON (e.name) e.name AS "name!", s.url
           FROM webhook_subscriptions s CROSS JOIN LATERAL unnest(s.events) AS e(name)
           WHERE s.enabled AND e.name LIKE 'on\_%'
           ORDER BY e.name, s.created_at, s.id"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.name, r.url)).collect())
}

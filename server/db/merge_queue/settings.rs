//! A project's merge settings: the gate command and its timeout, the fix cap, where conflicts go,
//! whether merged branches are kept, and how the queue gates: batch size, gates at once and a
//! flaky gate's retry. A project without a row has [`MergeSettings::default`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::events;

/// Where a conflict goes: a fix agent (up to the cap) or straight to a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnConflict {
    Agent,
    Human,
}

impl OnConflict {
    pub fn as_str(&self) -> &'static str {
        match self {
            OnConflict::Agent => "agent",
            OnConflict::Human => "human",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"merge_check": "./ci/test.sh", "gate_timeout_secs": 1800, "fix_cap": 2,
    "on_conflict": "agent", "keep_branches": false, "batch_max": 4, "gate_concurrency": 4, "retry_flaky": false,
    "version": 3}))]
pub struct MergeSettings {
    /// Run with `sh -c` in a scratch clone checked out at the merge commit; the target branch
    /// moves only when it exits 0. None: no gate.
    pub merge_check: Option<String>,
    pub gate_timeout_secs: i32,
    /// Fix agents per entry (conflicts and gate failures) before a person is asked.
    pub fix_cap: i32,
    pub on_conflict: OnConflict,
    /// Keep the wish branch and its group branches after the merge.
    pub keep_branches: bool,
    /// The most entries merged onto one projected head and gated once.
    pub batch_max: i32,
    /// The most gates at once: batches speculating on the heads ahead of them, bisection's parts
    /// and independent lanes share them.
    pub gate_concurrency: i32,
    /// A red batch is gated once more before it is bisected.
    pub retry_flaky: bool,
    /// 0 until the settings were first written.
    pub version: i32,
    pub updated_at: Option<DateTime<Utc>>,
}

impl Default for MergeSettings {
    /// The column defaults.
    fn default() -> Self {
        MergeSettings {
            merge_check: None,
            gate_timeout_secs: 1800,
            fix_cap: 2,
            on_conflict: OnConflict::Agent,
            keep_branches: false,
            batch_max: 4,
            gate_concurrency: 4,
            retry_flaky: false,
            version: 0,
            updated_at: None,
        }
    }
}

pub async fn get(conn: &mut PgConnection, project_id: Uuid) -> Result<MergeSettings, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT merge_check, gate_timeout_secs, fix_cap, on_conflict, keep_branches, batch_max, gate_concurrency,
                retry_flaky, version, updated_at
         FROM merge_settings WHERE project_id = $1",
        project_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(match row {
        None => MergeSettings::default(),
        Some(r) => MergeSettings {
            merge_check: r.merge_check,
            gate_timeout_secs: r.gate_timeout_secs,
            fix_cap: r.fix_cap,
            on_conflict: if r.on_conflict == "human" { OnConflict::Human } else { OnConflict::Agent },
            keep_branches: r.keep_branches,
            batch_max: r.batch_max,
            gate_concurrency: r.gate_concurrency,
            retry_flaky: r.retry_flaky,
            version: r.version,
            updated_at: Some(r.updated_at),
        },
    })
}

/// Writes the settings if they are still at `expected_version` (0: never written); `None` when
/// someone else wrote them first.
pub async fn put(
    conn: &mut PgConnection,
    project_id: Uuid,
    project_slug: &str,
    new: &MergeSettings,
    expected_version: Option<i32>,
) -> Result<Option<MergeSettings>, sqlx::Error> {
    let written = sqlx::query_scalar!(
        "INSERT INTO merge_settings (project_id, merge_check, gate_timeout_secs, fix_cap, on_conflict, keep_branches,
             batch_max, gate_concurrency, retry_flaky)
         VALUES ($1, $2, $3, $4, $5, $6, $8, $9, $10)
         ON CONFLICT (project_id) DO UPDATE SET merge_check = EXCLUDED.merge_check,
             gate_timeout_secs = EXCLUDED.gate_timeout_secs, fix_cap = EXCLUDED.fix_cap,
             on_conflict = EXCLUDED.on_conflict, keep_branches = EXCLUDED.keep_branches,
             batch_max = EXCLUDED.batch_max, gate_concurrency = EXCLUDED.gate_concurrency,
             retry_flaky = EXCLUDED.retry_flaky, version = merge_settings.version + 1, updated_at = now()
         WHERE $7::integer IS NULL OR merge_settings.version = $7
         RETURNING version",
        project_id,
        new.merge_check,
        new.gate_timeout_secs,
        new.fix_cap,
        new.on_conflict.as_str(),
        new.keep_branches,
        expected_version,
        new.batch_max,
        new.gate_concurrency,
        new.retry_flaky
    )
    .fetch_optional(&mut *conn)
    .await?;
    if written.is_none() {
        return Ok(None);
    }
    let settings = get(conn, project_id).await?;
    events::record(
        conn,
        "project.merge_settings_updated",
        &format!("project:{project_slug}"),
        serde_json::json!({"slug": project_slug, "version": settings.version}),
    )
    .await?;
    Ok(Some(settings))
}

//! Projects: a named scope over one git repository.

use sqlx::PgConnection;
use uuid::Uuid;

use super::{Error, Result};
use crate::db::projects;

/// The id of the project named by `slug` in `field`; an unknown slug is a bad `field`.
pub async fn id(conn: &mut PgConnection, slug: &str, field: &str) -> Result<Uuid> {
    projects::id_by_slug(conn, slug).await?.ok_or_else(|| Error::invalid(field, format!("no project `{slug}`")))
}

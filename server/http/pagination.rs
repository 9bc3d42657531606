//! Cursor pagination, shared by every list: ordered by `(created_at, id)`, the cursor is the
//! last item's position, opaque to clients (base64 of `created_at|id`).

use base64::Engine;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::http::error::ApiError;

pub const DEFAULT_LIMIT: i64 = 50;
pub const MAX_LIMIT: i64 = 200;

/// `?cursor=…&limit=…` as sent by the client.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// `next_cursor` from the previous page; omit for the first page.
    pub cursor: Option<String>,
    /// Items per page, 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
}

/// One page of a list, with the cursor of the next page when there is one.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// A decoded cursor: the position after which the next page starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Position {
    pub created_at: DateTime<Utc>,
    pub id: Uuid,
}

impl PageQuery {
    /// The validated limit, and the position to continue after (if any).
    pub fn parse(&self) -> Result<(i64, Option<Position>), ApiError> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ApiError::validation("limit", format!("must be between 1 and {MAX_LIMIT}")));
        }
        let position = self.cursor.as_deref().map(decode).transpose()?;
        Ok((limit, position))
    }
}

/// Builds a page from up to `limit + 1` rows (fetch one more than asked, to know if there is a
/// next page).
pub fn page<T>(mut rows: Vec<T>, limit: i64, position_of: impl Fn(&T) -> Position) -> Page<T> {
    let more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let next_cursor = if more { rows.last().map(|last| encode(position_of(last))) } else { None };
    Page { items: rows, next_cursor }
}

pub fn encode(position: Position) -> String {
    let raw = format!("{}|{}", position.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true), position.id);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

pub fn decode(cursor: &str) -> Result<Position, ApiError> {
    let invalid = || ApiError::validation("cursor", "is not a cursor this API returned");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let raw = String::from_utf8(raw).map_err(|_| invalid())?;
    let (at, id) = raw.split_once('|').ok_or_else(invalid)?;
    Ok(Position {
        created_at: DateTime::parse_from_rfc3339(at).map_err(|_| invalid())?.with_timezone(&Utc),
        id: Uuid::parse_str(id).map_err(|_| invalid())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips() {
        let position = Position { created_at: Utc::now(), id: Uuid::new_v4() };
        let back = decode(&encode(position)).expect("decodes");
        assert_eq!(back.id, position.id);
        assert_eq!(back.created_at.timestamp_micros(), position.created_at.timestamp_micros());
    }

    #[test]
    fn garbage_is_a_validation_error_on_cursor() {
        match decode("not-a-cursor!") {
            Err(ApiError::Validation { errors, .. }) => assert_eq!(errors[0].field, "cursor"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_full_page_has_a_next_cursor_and_a_short_one_does_not() {
        let now = Utc::now();
        let rows: Vec<Position> = (0..3).map(|_| Position { created_at: now, id: Uuid::new_v4() }).collect();
        let full = page(rows.clone(), 2, |p| *p);
        assert_eq!(full.items.len(), 2);
        assert!(full.next_cursor.is_some());
        let last = page(rows, 3, |p| *p);
        assert!(last.next_cursor.is_none());
    }

    #[test]
    fn limits_outside_1_to_200_are_refused() {
        for limit in [0, 201, -1] {
            assert!(PageQuery { cursor: None, limit: Some(limit) }.parse().is_err());
        }
    }
}

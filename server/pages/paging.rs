//! Long lists on a page, shown a page at a time from the newest: `?<param>=<cursor>` shows the
//! entries older than the cursor. Cursors are the API's own ([`pagination`]): the position
//! `(created_at, id)` of the oldest entry shown, so the next page starts right after it, whatever
//! was added since. A page links to the next older page and back to the newest; only the newest
//! page follows the live stream (an older one stays as it was read).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::http::error::ApiError;
use crate::http::pagination::{self, Position};
use crate::pages::view::PageResult;

/// One page of a list, newest first, from up to `limit + 1` rows read newest first, and the links
/// around it.
pub struct Paged<T> {
    pub items: Vec<T>,
    pub links: PageLinks,
}

/// Where a list's links go. Each keeps the page's other query pairs (another list's cursor).
pub struct PageLinks {
    /// The newest page, when this is an older one.
    pub newest: Option<String>,
    /// The next older page, when there are older entries.
    pub older: Option<String>,
    /// Where the list's part of the page fetches itself again when the live stream says it
    /// changed: on the newest page only.
    pub live: Option<String>,
}

/// Where a list lives on its page: the page's path, the query parameter of its cursor, the
/// `?block=` that renders it alone, and the other query pairs every link keeps.
pub struct ListAt<'a> {
    pub path: &'a str,
    pub param: &'a str,
    pub block: &'a str,
    pub keep: &'a [(&'a str, &'a str)],
}

impl ListAt<'_> {
    /// The position the page starts before, from the list's query parameter: none for the newest
    /// page; a cursor this server did not make is a 422 naming the parameter.
    pub fn before(&self, cursor: Option<&str>) -> PageResult<Option<(DateTime<Utc>, Uuid)>> {
        let Some(cursor) = cursor else { return Ok(None) };
        let position = pagination::decode(cursor).map_err(|_| {
            ApiError::validation(self.param, "is not a link to a page of this list; start again from the newest page")
        })?;
        Ok(Some((position.created_at, position.id)))
    }

    /// The page of `rows` (newest first, up to `limit + 1`: one more tells there is an older page)
    /// shown when the query named `cursor`.
    pub fn page<T>(
        &self,
        rows: Vec<T>,
        limit: i64,
        cursor: Option<&str>,
        position_of: impl Fn(&T) -> Position,
    ) -> Paged<T> {
        let page = pagination::page(rows, limit, position_of);
        let links = PageLinks {
            newest: cursor.map(|_| self.url(&[])),
            older: page.next_cursor.map(|next| self.url(&[(self.param, &next)])),
            live: cursor.is_none().then(|| self.url(&[("block", self.block)])),
        };
        Paged { items: page.items, links }
    }

    fn url(&self, pairs: &[(&str, &str)]) -> String {
        let query =
            form_urlencoded::Serializer::new(String::new()).extend_pairs(self.keep.iter().chain(pairs)).finish();
        if query.is_empty() {
            self.path.to_owned()
        } else {
            format!("{}?{query}", self.path)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pages::view::PageError;

    fn rows(n: usize) -> Vec<Position> {
        let now = Utc::now();
        (0..n).map(|_| Position { created_at: now, id: Uuid::new_v4() }).collect()
    }

    #[test]
    fn the_newest_page_is_live_and_links_to_the_next_older_one_only() {
        let list = ListAt { path: "/teams/a", param: "before", block: "chat", keep: &[] };
        let page = list.page(rows(3), 2, None, |p| *p);
        assert_eq!(page.items.len(), 2);
        let cursor = pagination::encode(page.items[1]);
        assert_eq!(page.links.older, Some(format!("/teams/a?before={cursor}")));
        assert_eq!(page.links.newest, None);
        assert_eq!(page.links.live.as_deref(), Some("/teams/a?block=chat"));
    }

    #[test]
    fn an_older_page_links_back_to_the_newest_keeps_other_lists_cursors_and_is_not_live() {
        let list =
            ListAt { path: "/messages", param: "pending_before", block: "pending", keep: &[("delivered_before", "x")] };
        let last = list.page(rows(2), 2, Some("c"), |p| *p);
        assert_eq!(last.links.older, None, "no more rows than a page: no older page");
        assert_eq!(last.links.newest.as_deref(), Some("/messages?delivered_before=x"));
        assert_eq!(last.links.live, None);
    }

    #[test]
    fn a_cursor_the_server_did_not_make_is_refused_naming_the_parameter() {
        let list = ListAt { path: "/teams/a", param: "before", block: "chat", keep: &[] };
        match list.before(Some("nonsense")) {
            Err(PageError(ApiError::Validation { errors, .. })) => assert_eq!(errors[0].field, "before"),
            other => panic!("{other:?}"),
        }
        assert_eq!(list.before(None).expect("no cursor"), None);
        let position = Position { created_at: Utc::now(), id: Uuid::new_v4() };
        let back = list.before(Some(&pagination::encode(position))).expect("a cursor").expect("a position");
        assert_eq!(back.1, position.id);
    }
}

//! `/api/v1/projects/{slug}/boards` and `/api/v1/boards/{id}`: boards and their columns
//! (routes arrive in the next commit).

use utoipa_axum::router::OpenApiRouter;

use crate::api::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
}

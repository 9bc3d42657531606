//! The anthropic wire format of the scripted model (see the module above): its routes read a
//! [`super::Turn`] from each request and write [`super::ScriptedModel::answer`] back.

use axum::Router;

use super::ScriptedModel;

pub fn routes() -> Router<ScriptedModel> {
    Router::new()
}

//! What a use case can answer besides its result, in the model's words and free of any protocol:
//! the API renders it as problem+json, the dashboard as a page or a flash, the worker as a log
//! line or a retry.

use serde::Serialize;

/// One bad field and what is wrong with it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"field": "groups[1].depends_on", "message": "unknown group key `db`"}))]
pub struct FieldError {
    /// The field's JSON path, e.g. `groups[2].depends_on`.
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError { field: field.into(), message: message.into() }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What the caller named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The thing is not in a state that allows this: an illegal transition, a duplicate, a full
    /// column, unmerged work. `current_state` is the thing's state now, when it has one.
    #[error("{detail}")]
    Conflict { detail: String, current_state: Option<String> },
    /// The caller's input is wrong; each field says how.
    #[error("{}", describe(.0))]
    Invalid(Vec<FieldError>),
    /// The caller may not do this (an agent's token moving a card a person must move).
    #[error("{0}")]
    Forbidden(String),
    /// The caller's copy is out of date (an `If-Match` that no longer matches).
    #[error("{0}")]
    Stale(String),
    /// The database cannot be reached just now (down, restarting, out of connections): worth
    /// trying again shortly.
    #[error("{0}")]
    Unavailable(String),
    /// Ours, not the caller's: the database or git failed.
    #[error(transparent)]
    Internal(anyhow::Error),
}

fn describe(errors: &[FieldError]) -> String {
    errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; ")
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Collects every bad field of one request, so the caller hears of all of them at once:
/// `let mut f = Fields::default(); f.check("name", ok, "…"); f.finish()?;`.
#[derive(Debug, Default)]
#[must_use = "call finish() to refuse the request when a field is bad"]
pub struct Fields(Vec<FieldError>);

impl Fields {
    /// Records `message` against `field` unless `ok`.
    pub fn check(&mut self, field: impl Into<String>, ok: bool, message: impl Into<String>) -> &mut Fields {
        if !ok {
            self.0.push(FieldError::new(field, message));
        }
        self
    }

    /// Records a text that is longer than `max` characters (its length is checked before anything
    /// else runs, so a huge value never reaches git or the database).
    pub fn max_len(&mut self, field: impl Into<String>, value: &str, max: usize) -> &mut Fields {
        // Bytes first: a cheap bound that keeps counting characters of a huge value from mattering.
        let ok = value.len() <= max || value.chars().count() <= max;
        self.check(field, ok, format!("must be at most {max} characters"))
    }

    /// Records why a rule refused a field's value, if it did (`Err` holds the sentence).
    pub fn rule(&mut self, field: impl Into<String>, outcome: std::result::Result<(), String>) -> &mut Fields {
        match outcome {
            Ok(()) => self,
            Err(why) => self.check(field, false, why),
        }
    }

    /// [`Fields::max_len`] for a value that may be absent.
    pub fn max_len_opt(&mut self, field: impl Into<String>, value: Option<&str>, max: usize) -> &mut Fields {
        match value {
            Some(value) => self.max_len(field, value, max),
            None => self,
        }
    }

    /// Takes the outcome of another check: its bad fields join these (`None` then), any other
    /// error is returned at once.
    pub fn take<T>(&mut self, outcome: Result<T>) -> Result<Option<T>> {
        match outcome {
            Ok(value) => Ok(Some(value)),
            Err(Error::Invalid(errors)) => {
                self.0.extend(errors);
                Ok(None)
            }
            Err(other) => Err(other),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.0.is_empty()
    }

    /// `Err(Invalid)` with every bad field recorded, if any.
    pub fn finish(self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Error::Invalid(self.0))
        }
    }
}

impl Error {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Invalid(vec![FieldError::new(field, message)])
    }

    pub fn conflict(detail: impl Into<String>, current_state: Option<&str>) -> Error {
        Error::Conflict { detail: detail.into(), current_state: current_state.map(str::to_owned) }
    }

    pub fn internal(error: impl Into<anyhow::Error>) -> Error {
        Error::from(error.into())
    }

    /// A unique violation of `constraint` becomes a conflict saying `detail` in the model's
    /// words; every other error converts as usual.
    pub fn unique_as(constraint: &'static str, detail: impl Into<String>) -> impl FnOnce(sqlx::Error) -> Error {
        let detail = detail.into();
        move |error| match &error {
            sqlx::Error::Database(db) if db.is_unique_violation() && db.constraint() == Some(constraint) => {
                Error::conflict(detail, None)
            }
            _ => Error::from(error),
        }
    }
}

/// Whether `error` says the database is out of reach (rather than that a statement failed): no
/// connection to be had in time, a refused or broken connection, a server shutting down or
/// starting up (SQLSTATE classes 08 and 57P).
pub fn is_outage(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| code.starts_with("08") || code.starts_with("57P")),
        _ => false,
    }
}

/// An error that went through `anyhow` is ours, unless a database outage is inside it (a step
/// that `?`-ed a `sqlx::Error` into anyhow): that is still an outage, worth a retry.
impl From<anyhow::Error> for Error {
    fn from(error: anyhow::Error) -> Error {
        if error.chain().any(|e| e.downcast_ref::<sqlx::Error>().is_some_and(is_outage)) {
            return Error::Unavailable("the database is not reachable just now; try again shortly".into());
        }
        Error::Internal(error)
    }
}

/// Database errors: constraint violations are the caller's doing (a conflict, a bad field), an
/// outage is worth a retry, everything else is ours. The one place that makes this decision.
impl From<sqlx::Error> for Error {
    fn from(error: sqlx::Error) -> Error {
        if is_outage(&error) {
            tracing::debug!(error = %error, "the database is out of reach");
            return Error::Unavailable("the database is not reachable just now; try again shortly".into());
        }
        if let sqlx::Error::Database(db) = &error {
            // A deadlock or a serialization failure is two transactions crossing: the request
            // is safe to repeat (its transaction rolled back). Still logged: a deadlock means
            // two paths take their locks in different orders.
            if matches!(db.code().as_deref(), Some("40P01" | "40001")) {
                tracing::warn!(error = %error, "a transaction crossed another; the caller may retry");
                return Error::Unavailable("a concurrent change got in the way; try again".into());
            }
            let constraint = db.constraint().unwrap_or("").to_owned();
            match db.kind() {
                sqlx::error::ErrorKind::UniqueViolation => {
                    return Error::conflict(format!("already exists ({constraint})"), None)
                }
                sqlx::error::ErrorKind::ForeignKeyViolation => {
                    return Error::invalid(constraint, "refers to something that does not exist")
                }
                sqlx::error::ErrorKind::CheckViolation | sqlx::error::ErrorKind::NotNullViolation => {
                    return Error::invalid(constraint, "is not an allowed value")
                }
                _ => {}
            }
        }
        Error::Internal(error.into())
    }
}

impl From<crate::git::GitError> for Error {
    fn from(error: crate::git::GitError) -> Error {
        Error::Internal(error.into())
    }
}

//! Board rules: column gates, column blueprints (used by templates and new boards), and their
//! validation. Pure; the database layer stores what these functions accept.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

/// The most columns a board or template may have: more is no longer a pipeline anyone reads.
pub const MAX_COLUMNS: usize = 30;
pub const MAX_COLUMN_NAME: usize = 100;
pub const MAX_ACTION_SKILL: usize = 200;

/// Who lets a card leave a column. Stored as its lowercase name, matching the SQL `CHECK`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(example = "human")]
pub enum Gate {
    /// Cards move on by themselves.
    #[default]
    Auto,
    /// A person approves the move.
    Human,
    /// An agent (running the column's `action_skill`) decides.
    Agent,
}

impl Gate {
    pub fn as_str(self) -> &'static str {
        match self {
            Gate::Auto => "auto",
            Gate::Human => "human",
            Gate::Agent => "agent",
        }
    }

    /// Reads the stored name; the `CHECK` constraint admits only these three, so anything else
    /// falls back to the harmless default rather than failing a read.
    pub fn from_db(value: &str) -> Gate {
        match value {
            "human" => Gate::Human,
            "agent" => Gate::Agent,
            _ => Gate::Auto,
        }
    }
}

/// One column as a blueprint: what a template stores and what a new board is created from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Review", "gate": "human", "action_skill": "review-pr", "wip_limit": 3}))]
pub struct ColumnSpec {
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    #[serde(default)]
    pub gate: Gate,
    /// What an agent is asked to do when a card enters the column.
    #[serde(default)]
    pub action_skill: Option<String>,
    /// The most cards the column may hold; absent means no limit.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub wip_limit: Option<i32>,
}

impl ColumnSpec {
    pub fn new(name: &str, gate: Gate) -> ColumnSpec {
        ColumnSpec { name: name.to_owned(), gate, action_skill: None, wip_limit: None }
    }
}

/// A rule a column list broke, naming the field by its JSON path (`columns[2].wip_limit`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidColumn {
    pub field: String,
    pub message: String,
}

fn invalid(field: String, message: impl Into<String>) -> InvalidColumn {
    InvalidColumn { field, message: message.into() }
}

/// The columns a board gets when it is created with neither columns nor a template.
pub fn default_columns() -> Vec<ColumnSpec> {
    vec![
        ColumnSpec::new("Backlog", Gate::Auto),
        ColumnSpec::new("In progress", Gate::Auto),
        ColumnSpec::new("Review", Gate::Human),
        ColumnSpec::new("Done", Gate::Auto),
    ]
}

/// Checks one column's own fields (not its place among others), every bad one named; `field`
/// prefixes the paths.
pub fn validate_column(field: &str, column: &ColumnSpec) -> Result<ColumnSpec, Vec<InvalidColumn>> {
    let name = validate_column_name(&format!("{field}name"), &column.name);
    let action_skill = validate_action_skill(&format!("{field}action_skill"), column.action_skill.as_deref());
    let wip_limit = validate_wip_limit(&format!("{field}wip_limit"), column.wip_limit);
    match (name, action_skill, wip_limit) {
        (Ok(name), Ok(action_skill), Ok(())) => {
            Ok(ColumnSpec { name, gate: column.gate, action_skill, wip_limit: column.wip_limit })
        }
        (name, action_skill, wip_limit) => {
            Err([name.err(), action_skill.err(), wip_limit.err()].into_iter().flatten().collect())
        }
    }
}

/// Checks a whole column list under `field` (e.g. `columns`): 1 to 30 columns, each valid, no
/// two with the same name (compared case-insensitively: "Done" and "done" would confuse anyone).
/// Returns the columns with names and skills trimmed, or every bad field of every column.
pub fn validate_columns(field: &str, columns: &[ColumnSpec]) -> Result<Vec<ColumnSpec>, Vec<InvalidColumn>> {
    if columns.is_empty() || columns.len() > MAX_COLUMNS {
        return Err(vec![invalid(field.to_owned(), format!("must have 1 to {MAX_COLUMNS} columns"))]);
    }
    let mut seen = HashSet::new();
    let mut clean = Vec::with_capacity(columns.len());
    let mut errors = Vec::new();
    for (i, column) in columns.iter().enumerate() {
        match validate_column(&format!("{field}[{i}]."), column) {
            Ok(column) if !seen.insert(column.name.to_lowercase()) => errors
                .push(invalid(format!("{field}[{i}].name"), format!("`{}` is used by an earlier column", column.name))),
            Ok(column) => clean.push(column),
            Err(bad) => errors.extend(bad),
        }
    }
    if errors.is_empty() {
        Ok(clean)
    } else {
        Err(errors)
    }
}

pub fn validate_column_name(field: &str, name: &str) -> Result<String, InvalidColumn> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_COLUMN_NAME {
        return Err(invalid(field.to_owned(), format!("must be 1 to {MAX_COLUMN_NAME} characters")));
    }
    Ok(name.to_owned())
}

/// A blank skill means "none", so clients may clear it with `""` as well as `null`.
pub fn validate_action_skill(field: &str, skill: Option<&str>) -> Result<Option<String>, InvalidColumn> {
    match skill.map(str::trim) {
        None | Some("") => Ok(None),
        Some(s) if s.chars().count() > MAX_ACTION_SKILL => {
            Err(invalid(field.to_owned(), format!("must be at most {MAX_ACTION_SKILL} characters")))
        }
        Some(s) => Ok(Some(s.to_owned())),
    }
}

/// Whether a column holding `cards` has no room for one more under its WIP limit. Tasks and
/// wishes are both cards: each counts toward the limit.
pub fn is_full(wip_limit: Option<i32>, cards: i64) -> bool {
    wip_limit.is_some_and(|limit| cards >= i64::from(limit))
}

pub fn validate_wip_limit(field: &str, limit: Option<i32>) -> Result<(), InvalidColumn> {
    match limit {
        Some(n) if n <= 0 => Err(invalid(field.to_owned(), "must be greater than 0 (omit it for no limit)")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(columns: &[ColumnSpec]) -> String {
        validate_columns("columns", columns).expect_err("invalid")[0].field.clone()
    }

    #[test]
    fn every_bad_field_of_every_column_is_named() {
        let mut columns = default_columns();
        columns[0].name = " ".into();
        columns[0].wip_limit = Some(0);
        columns[2].action_skill = Some("x".repeat(MAX_ACTION_SKILL + 1));
        columns[3].name = "in progress".into();
        let fields: Vec<String> =
            validate_columns("columns", &columns).expect_err("invalid").into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["columns[0].name", "columns[0].wip_limit", "columns[2].action_skill", "columns[3].name"]);
    }

    #[test]
    fn the_default_columns_are_valid_and_review_is_gated_by_a_human() {
        let columns = validate_columns("columns", &default_columns()).expect("valid");
        let names: Vec<_> = columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Backlog", "In progress", "Review", "Done"]);
        assert_eq!(columns[2].gate, Gate::Human);
    }

    #[test]
    fn an_empty_or_oversized_list_is_refused_on_the_list_itself() {
        assert_eq!(field_of(&[]), "columns");
        let many: Vec<_> = (0..=MAX_COLUMNS).map(|i| ColumnSpec::new(&format!("c{i}"), Gate::Auto)).collect();
        assert_eq!(field_of(&many), "columns");
    }

    #[test]
    fn a_bad_column_is_named_by_its_index_and_field() {
        let mut columns = default_columns();
        columns[1].wip_limit = Some(0);
        assert_eq!(field_of(&columns), "columns[1].wip_limit");
        let mut columns = default_columns();
        columns[2].name = "  ".into();
        assert_eq!(field_of(&columns), "columns[2].name");
        let mut columns = default_columns();
        columns[3].name = "backlog".into();
        assert_eq!(field_of(&columns), "columns[3].name");
    }

    #[test]
    fn names_and_skills_are_trimmed_and_a_blank_skill_is_none() {
        let column =
            ColumnSpec { name: " Ship ".into(), gate: Gate::Agent, action_skill: Some(" ".into()), wip_limit: Some(2) };
        let clean = validate_column("", &column).expect("valid");
        assert_eq!(clean.name, "Ship");
        assert_eq!(clean.action_skill, None);
    }

    #[test]
    fn a_column_is_full_once_its_cards_reach_the_limit_and_never_without_one() {
        assert!(!is_full(Some(2), 1));
        assert!(is_full(Some(2), 2));
        assert!(is_full(Some(2), 3), "a column over its limit (the limit was lowered) is full too");
        assert!(!is_full(None, 1_000));
    }

    #[test]
    fn gates_round_trip_through_their_stored_names() {
        for gate in [Gate::Auto, Gate::Human, Gate::Agent] {
            assert_eq!(Gate::from_db(gate.as_str()), gate);
            assert_eq!(serde_json::to_value(gate).expect("json"), gate.as_str());
        }
    }
}

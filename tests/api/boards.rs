//! `/api/v1/boards`: boards, columns, reconcile and templates (tests arrive with the routes).

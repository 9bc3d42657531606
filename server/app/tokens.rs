//! (filled in by the application-layer refactor)

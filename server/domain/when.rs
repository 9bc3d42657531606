//! Times as people read them: how long ago, in the fewest words that still help (the dashboard's
//! pages and the CLI's listings say it the same way).

use chrono::{DateTime, Utc};

/// "3 min ago", "2 h ago", "5 d ago": how long ago, in the fewest words that still help.
pub fn ago(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (now - at).num_seconds();
    match seconds {
        s if s < 5 => "just now".to_owned(),
        s if s < 60 => format!("{s} s ago"),
        s if s < 3600 => format!("{} min ago", s / 60),
        s if s < 86_400 => format!("{} h ago", s / 3600),
        s => format!("{} d ago", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times_use_the_largest_unit_that_fits() {
        let now = Utc::now();
        assert_eq!(ago(now, now), "just now");
        assert_eq!(ago(now - chrono::Duration::seconds(42), now), "42 s ago");
        assert_eq!(ago(now - chrono::Duration::minutes(3), now), "3 min ago");
        assert_eq!(ago(now - chrono::Duration::hours(5), now), "5 h ago");
        assert_eq!(ago(now - chrono::Duration::days(9), now), "9 d ago");
    }
}

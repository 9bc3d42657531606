//! When a usage limit resets, from the words a provider prints.
//!
//! Forms seen in the wild:
//! - Claude Code: `You've hit your limit · resets 3pm (Europe/Berlin)`, `5-hour limit reached ∙
//!   resets 1am`, `Weekly limit reached ∙ resets Oct 9 at 10am`, `Your limit will reset at 3pm
//!   (America/New_York)`.
//! - Codex: `… or try again at 3:28 PM.`, `try again in 3 days 6 hours 57 minutes`, `try again at
//!   Aug 8th, 2026 12:30 PM`.
//! - Gemini CLI: `Access resets at 11:00 AM GMT+2.`, `Your quota will reset after 12h22m45s.`
//!
//! A clock time is the next such time after `now` (a time already past today means tomorrow; a
//! date without a year already past means next year). The zone is the IANA name in parentheses,
//! `UTC`/`GMT±h`, or a common abbreviation (`PST`, `CEST` …); with none, the caller's zone (the
//! tools print their machine's local time, and the worker runs on that machine).

use std::sync::LazyLock;

use chrono::{DateTime, Datelike, Duration, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use regex::Regex;

/// How long to wait when a limit is shown but its reset time cannot be read: resuming early only
/// shows the limit again, which suspends the agent again.
pub const UNKNOWN_RESET_WAIT: Duration = Duration::hours(1);

static RELATIVE: LazyLock<Regex> = LazyLock::new(|| {
    // Longer unit names first: alternation takes the first that matches. No `\b` after a unit,
    // so the compact `12h22m45s` reads too.
    Regex::new(r"(?i)\b(?:in|after)\s+((?:\d+\s*(?:days?|hours?|hrs?|minutes?|mins?|seconds?|secs?|[dhms])[\s,]*(?:and\s+)?)+)")
        .expect("valid regex")
});

static PART: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)(\d+)\s*(d|h|m|s)[a-z]*").expect("valid regex"));

static ABSOLUTE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)
        \b(?:resets?|try\ again)\s+(?:at\s+)?
        (?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s*
           (?:(?P<year>\d{4}),?\s*)?(?:at\s+)?)?
        (?P<hour>\d{1,2})(?::(?P<min>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)?
        (?:\s*\((?P<iana>[A-Za-z_]+(?:/[A-Za-z_+0-9-]+)*)\)|\s+(?P<abbr>(?:UTC|GMT)(?:[+-]\d{1,2}(?::?\d{2})?)?|[A-Z]{3,4})\b)?",
    )
    .expect("valid regex")
});

/// The reset time in `text`, if it names one.
pub fn reset_time(text: &str, now: DateTime<Utc>, zone: Tz) -> Option<DateTime<Utc>> {
    if let Some(found) = RELATIVE.captures(text) {
        let mut total = Duration::zero();
        for part in PART.captures_iter(&found[1]) {
            let n: i64 = part[1].parse().ok()?;
            total += match part[2].to_ascii_lowercase().as_str() {
                "d" => Duration::days(n),
                "h" => Duration::hours(n),
                "m" => Duration::minutes(n),
                _ => Duration::seconds(n),
            };
        }
        return Some(now + total);
    }
    let found = ABSOLUTE.captures(text)?;
    let mut hour: u32 = found["hour"].parse().ok()?;
    let minute: u32 = found.name("min").map_or(Some(0), |m| m.as_str().parse().ok())?;
    match found.name("ampm").map(|m| m.as_str().to_ascii_lowercase()) {
        Some(ampm) if (1..=12).contains(&hour) => {
            hour %= 12;
            if ampm.starts_with('p') {
                hour += 12;
            }
        }
        Some(_) => return None,
        // "resets 3" alone is too vague to trust; a 24-hour clock has minutes.
        None if found.name("min").is_none() => return None,
        None => {}
    }
    let time = NaiveTime::from_hms_opt(hour, minute, 0)?;
    let date = match (found.name("mon"), found.name("day")) {
        (Some(mon), Some(day)) => {
            let month = month_number(mon.as_str())?;
            let day: u32 = day.as_str().parse().ok()?;
            Some((month, day, found.name("year").and_then(|y| y.as_str().parse::<i32>().ok())))
        }
        _ => None,
    };
    let zone = match (found.name("iana"), found.name("abbr")) {
        (Some(name), _) => Zone::Named(name.as_str().parse().unwrap_or(zone)),
        (None, Some(abbr)) => abbreviation(abbr.as_str()).map_or(Zone::Named(zone), Zone::Fixed),
        (None, None) => Zone::Named(zone),
    };
    match zone {
        Zone::Named(tz) => next_at(&tz, now, time, date),
        Zone::Fixed(offset) => next_at(&offset, now, time, date),
    }
}

enum Zone {
    Named(Tz),
    Fixed(FixedOffset),
}

/// The first instant at or after `now` showing `time` (on `date` when given) in `zone`.
fn next_at<Z: TimeZone>(
    zone: &Z,
    now: DateTime<Utc>,
    time: NaiveTime,
    date: Option<(u32, u32, Option<i32>)>,
) -> Option<DateTime<Utc>> {
    let today = now.with_timezone(zone).date_naive();
    let candidates: Vec<NaiveDate> = match date {
        Some((month, day, Some(year))) => vec![NaiveDate::from_ymd_opt(year, month, day)?],
        Some((month, day, None)) => [today.year(), today.year() + 1]
            .into_iter()
            .filter_map(|y| NaiveDate::from_ymd_opt(y, month, day))
            .collect(),
        None => vec![today, today.succ_opt()?],
    };
    let mut last = None;
    for day in candidates {
        let at = local(zone, day.and_time(time))?;
        last = Some(at);
        if at > now {
            return Some(at);
        }
    }
    // An explicit date in the past: the provider said so; report it (the worker resumes at once).
    last
}

/// A local wall-clock time as UTC; in a DST gap, the hour after.
fn local<Z: TimeZone>(zone: &Z, at: NaiveDateTime) -> Option<DateTime<Utc>> {
    zone.from_local_datetime(&at)
        .earliest()
        .or_else(|| zone.from_local_datetime(&(at + Duration::hours(1))).earliest())
        .map(|t| t.with_timezone(&Utc))
}

fn month_number(name: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    let prefix = name.get(..3)?.to_ascii_lowercase();
    MONTHS.iter().position(|m| *m == prefix).map(|i| i as u32 + 1)
}

/// `UTC`, `GMT+2`, `UTC-05:30`, or a common abbreviation; `None` for anything else.
fn abbreviation(abbr: &str) -> Option<FixedOffset> {
    let hours = |h: i32| FixedOffset::east_opt(h * 3600);
    if let Some(rest) = abbr.strip_prefix("UTC").or_else(|| abbr.strip_prefix("GMT")) {
        if rest.is_empty() {
            return hours(0);
        }
        let sign = if rest.starts_with('-') { -1 } else { 1 };
        let digits = rest[1..].replace(':', "");
        let (h, m) = if digits.len() > 2 { digits.split_at(digits.len() - 2) } else { (digits.as_str(), "0") };
        return FixedOffset::east_opt(sign * (h.parse::<i32>().ok()? * 3600 + m.parse::<i32>().ok()? * 60));
    }
    match abbr {
        "PST" => hours(-8),
        "PDT" | "MST" => hours(-7),
        "MDT" | "CST" => hours(-6),
        "CDT" | "EST" => hours(-5),
        "EDT" => hours(-4),
        "BST" | "CET" => hours(1),
        "CEST" | "EET" => hours(2),
        "EEST" => hours(3),
        "IST" => FixedOffset::east_opt(5 * 3600 + 1800),
        "JST" | "KST" => hours(9),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// 2026-11-22 is a Sunday; Berlin is on CET (UTC+1) then.
    const NOW: &str = "2026-11-22T10:00:00Z";

    #[test]
    fn a_clock_time_with_an_iana_zone_is_read_in_that_zone() {
        let at = reset_time("You've hit your limit · resets 3pm (Europe/Berlin)", utc(NOW), Tz::UTC);
        assert_eq!(at, Some(utc("2026-11-22T14:00:00Z")));
    }

    #[test]
    fn a_clock_time_already_past_today_means_tomorrow() {
        let at = reset_time("5-hour limit reached ∙ resets 1am", utc(NOW), Tz::UTC);
        assert_eq!(at, Some(utc("2026-11-23T01:00:00Z")));
        let at = reset_time("resets 10am", utc(NOW), Tz::UTC);
        assert_eq!(at, Some(utc("2026-11-23T10:00:00Z")), "exactly now is not in the future");
    }

    #[test]
    fn without_a_zone_the_callers_zone_applies() {
        let at = reset_time("5-hour limit reached ∙ resets 1am", utc(NOW), chrono_tz::Europe::Berlin);
        assert_eq!(at, Some(utc("2026-11-23T00:00:00Z")));
    }

    #[test]
    fn codex_clock_times_and_durations_are_read() {
        let now = utc(NOW);
        assert_eq!(reset_time("or try again at 3:28 PM.", now, Tz::UTC), Some(utc("2026-11-22T15:28:00Z")));
        assert_eq!(
            reset_time("send a request to your admin or try again in 3 days 6 hours 57 minutes.", now, Tz::UTC),
            Some(now + Duration::minutes(((3 * 24 + 6) * 60) + 57))
        );
        assert_eq!(reset_time("try again at Aug 8th, 2027 12:30 PM", now, Tz::UTC), Some(utc("2027-08-08T12:30:00Z")));
    }

    #[test]
    fn a_date_without_a_year_is_the_next_such_date() {
        let at = reset_time("Weekly limit reached ∙ resets Oct 9 at 10am (UTC)", utc(NOW), Tz::UTC);
        assert_eq!(at, Some(utc("2027-10-09T10:00:00Z")));
        let at = reset_time("You've hit your limit · resets Nov 24, 9am (Europe/Berlin)", utc(NOW), Tz::UTC);
        assert_eq!(at, Some(utc("2026-11-24T08:00:00Z")));
    }

    #[test]
    fn gemini_offsets_and_compact_durations_are_read() {
        let now = utc(NOW);
        assert_eq!(reset_time("Access resets at 11:00 AM GMT+2.", now, Tz::UTC), Some(utc("2026-11-23T09:00:00Z")));
        assert_eq!(reset_time("Access resets at 3:45 PM PST", now, Tz::UTC), Some(utc("2026-11-22T23:45:00Z")));
        assert_eq!(
            reset_time("Your quota will reset after 12h22m45s.", now, Tz::UTC),
            Some(now + Duration::seconds(12 * 3600 + 22 * 60 + 45))
        );
    }

    #[test]
    fn text_without_a_time_gives_none() {
        let now = utc(NOW);
        assert_eq!(reset_time("You've hit your usage limit. Try again later.", now, Tz::UTC), None);
        assert_eq!(reset_time("resets 3", now, Tz::UTC), None);
        assert_eq!(reset_time("resets 13pm", now, Tz::UTC), None);
    }
}

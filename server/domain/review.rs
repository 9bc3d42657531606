//! The review loop for an executing wish: review → (fail) fix → review …, until a
//! review passes or the loop cap is reached.
//!
//! `iteration`: how many reviews have been recorded. Each
//! recorded verdict increments it, and the outcome carries the new value to store. `cap` is
//! the most reviews a wish gets: a fail on review number `cap` ends the loop with
//! [`ReviewOutcome::CapReached`], where the wish should fail or go to a human rather than get
//! another fix round. A pass always ends the loop, including on the last allowed review.

use serde::{Deserialize, Serialize};

/// A reviewer's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
}

/// Where a wish's review loop stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewState {
    /// Reviews recorded so far.
    pub iteration: u32,
    /// The most reviews allowed; at least 1.
    pub cap: u32,
}

/// What a recorded verdict means for the wish. `iteration` is the review just recorded
/// (1-based), the new `review_iteration` to store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ReviewOutcome {
    /// The review passed; the loop is over.
    Passed { iteration: u32 },
    /// The review failed with reviews to spare; a fix round follows, then another review.
    FixRequested { iteration: u32 },
    /// The last allowed review failed; the wish fails or goes to a human.
    CapReached { iteration: u32 },
}

impl ReviewOutcome {
    /// The review number just recorded.
    pub fn iteration(&self) -> u32 {
        match self {
            ReviewOutcome::Passed { iteration }
            | ReviewOutcome::FixRequested { iteration }
            | ReviewOutcome::CapReached { iteration } => *iteration,
        }
    }
}

/// Why a verdict could not be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    #[error("the review loop cap must be at least 1")]
    ZeroCap,
    /// The loop already ended at the cap; a further review would exceed it.
    #[error("all {cap} allowed review(s) have already been recorded")]
    CapExhausted { cap: u32 },
}

/// Records one review's verdict against `state`.
pub fn record(state: ReviewState, verdict: Verdict) -> Result<ReviewOutcome, ReviewError> {
    if state.cap == 0 {
        return Err(ReviewError::ZeroCap);
    }
    if state.iteration >= state.cap {
        return Err(ReviewError::CapExhausted { cap: state.cap });
    }
    // iteration < cap <= u32::MAX, so this cannot overflow.
    let iteration = state.iteration + 1;
    Ok(match verdict {
        Verdict::Pass => ReviewOutcome::Passed { iteration },
        Verdict::Fail if iteration < state.cap => ReviewOutcome::FixRequested { iteration },
        Verdict::Fail => ReviewOutcome::CapReached { iteration },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::value::{Error as DeError, StrDeserializer};

    fn at(iteration: u32, cap: u32) -> ReviewState {
        ReviewState { iteration, cap }
    }

    #[test]
    fn a_pass_ends_the_loop_at_any_review() {
        assert_eq!(record(at(0, 3), Verdict::Pass), Ok(ReviewOutcome::Passed { iteration: 1 }));
        assert_eq!(record(at(2, 3), Verdict::Pass), Ok(ReviewOutcome::Passed { iteration: 3 }));
    }

    #[test]
    fn a_fail_below_the_cap_asks_for_a_fix() {
        assert_eq!(record(at(0, 3), Verdict::Fail), Ok(ReviewOutcome::FixRequested { iteration: 1 }));
        assert_eq!(record(at(1, 3), Verdict::Fail), Ok(ReviewOutcome::FixRequested { iteration: 2 }));
    }

    #[test]
    fn a_fail_on_the_last_allowed_review_reaches_the_cap() {
        assert_eq!(record(at(2, 3), Verdict::Fail), Ok(ReviewOutcome::CapReached { iteration: 3 }));
        assert_eq!(record(at(0, 1), Verdict::Fail), Ok(ReviewOutcome::CapReached { iteration: 1 }));
    }

    #[test]
    fn a_failing_loop_runs_exactly_cap_reviews() {
        let mut state = at(0, 4);
        let mut fixes = 0;
        loop {
            match record(state, Verdict::Fail).unwrap() {
                ReviewOutcome::FixRequested { iteration } => {
                    fixes += 1;
                    state.iteration = iteration;
                }
                outcome => {
                    assert_eq!(outcome, ReviewOutcome::CapReached { iteration: 4 });
                    break;
                }
            }
        }
        assert_eq!(fixes, 3);
    }

    #[test]
    fn no_review_is_recorded_past_the_cap_or_with_a_zero_cap() {
        let err = record(at(3, 3), Verdict::Pass).unwrap_err();
        assert_eq!(err, ReviewError::CapExhausted { cap: 3 });
        assert_eq!(err.to_string(), "all 3 allowed review(s) have already been recorded");
        assert_eq!(record(at(0, 0), Verdict::Pass), Err(ReviewError::ZeroCap));
        assert_eq!(record(at(u32::MAX - 1, u32::MAX), Verdict::Fail).map(|o| o.iteration()), Ok(u32::MAX));
    }

    #[test]
    fn verdicts_use_snake_case_names() {
        for (name, verdict) in [("pass", Verdict::Pass), ("fail", Verdict::Fail)] {
            let de = StrDeserializer::<DeError>::new(name);
            assert_eq!(Verdict::deserialize(de), Ok(verdict));
        }
        assert!(Verdict::deserialize(StrDeserializer::<DeError>::new("Pass")).is_err());
    }
}

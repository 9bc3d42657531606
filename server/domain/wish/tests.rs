//! Tests of the wish state machine: every (status, event) pair, held and not held, plus the
//! data-dependent rules (plan, blockers, resume targets).

use super::WishEvent as E;
use super::WishStatus as S;
use super::*;
use serde::de::value::{Error as DeError, StrDeserializer};

const EVENTS: [WishEvent; 16] = [
    E::Plan,
    E::Queue,
    E::Start,
    E::AllGroupsDone,
    E::GroupFailed,
    E::SubmitForMerge,
    E::Merged,
    E::Conflict,
    E::MergeFailed,
    E::Requeue,
    E::Withdraw,
    E::Interrupt,
    E::Cancel,
    E::Resume { to: None },
    E::Hold,
    E::Release,
];

/// A wish with a plan, tasks and no blockers: every data-dependent check passes.
fn wish(status: WishStatus) -> WishSnapshot {
    WishSnapshot { status, held: false, blockers_unmerged: 0, has_plan: true, has_tasks: true }
}

/// The legal status changes with full data, written out independently of `transition`.
/// Cancel and resume are listed per status rather than derived from `is_terminal`.
const LEGAL: [(WishStatus, WishEvent, WishStatus); 27] = [
    (S::Draft, E::Plan, S::Planned),
    (S::Planned, E::Queue, S::Queued),
    (S::Queued, E::Start, S::Executing),
    (S::Executing, E::AllGroupsDone, S::Completed),
    (S::Executing, E::GroupFailed, S::Failed),
    (S::Completed, E::SubmitForMerge, S::PendingMerge),
    (S::PendingMerge, E::Merged, S::Merged),
    (S::PendingMerge, E::Conflict, S::Conflict),
    (S::PendingMerge, E::MergeFailed, S::Failed),
    (S::Conflict, E::Requeue, S::PendingMerge),
    (S::Failed, E::Requeue, S::PendingMerge),
    (S::PendingMerge, E::Withdraw, S::Completed),
    (S::Queued, E::Interrupt, S::Interrupted),
    (S::Executing, E::Interrupt, S::Interrupted),
    (S::Draft, E::Cancel, S::Cancelled),
    (S::Planned, E::Cancel, S::Cancelled),
    (S::Queued, E::Cancel, S::Cancelled),
    (S::Executing, E::Cancel, S::Cancelled),
    (S::Completed, E::Cancel, S::Cancelled),
    (S::PendingMerge, E::Cancel, S::Cancelled),
    (S::Failed, E::Cancel, S::Cancelled),
    (S::Conflict, E::Cancel, S::Cancelled),
    (S::Interrupted, E::Cancel, S::Cancelled),
    (S::Failed, E::Resume { to: None }, S::Queued),
    (S::Conflict, E::Resume { to: None }, S::PendingMerge),
    (S::Interrupted, E::Resume { to: None }, S::Queued),
    (S::Cancelled, E::Resume { to: None }, S::Queued),
];

fn expected_unheld(from: WishStatus, event: WishEvent) -> Result<WishChange, WishError> {
    if let Some((_, _, to)) = LEGAL.iter().find(|(f, e, _)| *f == from && *e == event) {
        return Ok(WishChange::Status(*to));
    }
    match event {
        E::Hold if from != S::Merged && from != S::Cancelled => Ok(WishChange::Held(true)),
        E::Release => Err(WishError::NotHeld),
        E::Resume { .. } => Err(WishError::NothingToResume { status: from }),
        _ => Err(WishError::Illegal { from, event: event.name() }),
    }
}

#[test]
fn every_status_and_event_pair_follows_the_table_when_not_held() {
    for from in WishStatus::ALL {
        for event in EVENTS {
            let got = transition(&wish(from), &event);
            assert_eq!(got, expected_unheld(from, event), "{from} + {event:?}");
        }
    }
}

#[test]
fn a_held_wish_refuses_every_event_but_release() {
    for from in WishStatus::ALL {
        let held = WishSnapshot { held: true, ..wish(from) };
        for event in EVENTS {
            let want = match event {
                E::Release => Ok(WishChange::Held(false)),
                E::Hold => Err(WishError::AlreadyHeld),
                _ => Err(WishError::Held),
            };
            assert_eq!(transition(&held, &event), want, "{from} + {event:?}");
        }
    }
}

#[test]
fn final_states_cannot_be_held() {
    for from in [S::Merged, S::Cancelled] {
        let err = transition(&wish(from), &E::Hold).unwrap_err();
        assert_eq!(err, WishError::Illegal { from, event: "hold" });
    }
}

#[test]
fn start_is_refused_while_a_blocker_has_not_merged() {
    let blocked = WishSnapshot { blockers_unmerged: 2, ..wish(S::Queued) };
    let err = transition(&blocked, &E::Start).unwrap_err();
    assert_eq!(err, WishError::BlockedBy { count: 2 });
    assert_eq!(err.to_string(), "the wish is blocked by 2 wish(es) that have not merged yet");
    // Blockers only gate the start; a blocked wish may still be queued or cancelled.
    let planned = WishSnapshot { blockers_unmerged: 2, ..wish(S::Planned) };
    assert!(transition(&planned, &E::Queue).is_ok());
    assert!(transition(&blocked, &E::Cancel).is_ok());
    // A start from the wrong status is illegal whatever the blockers say.
    let draft = WishSnapshot { blockers_unmerged: 2, ..wish(S::Draft) };
    assert!(matches!(transition(&draft, &E::Start), Err(WishError::Illegal { .. })));
}

#[test]
fn planning_and_queueing_need_a_plan() {
    for (from, event) in [(S::Draft, E::Plan), (S::Planned, E::Queue)] {
        let bare = WishSnapshot { has_plan: false, has_tasks: false, ..wish(from) };
        assert_eq!(transition(&bare, &event), Err(WishError::NoPlan));
    }
}

#[test]
fn resume_goes_to_the_last_good_state_the_data_supports() {
    let cases = [(true, true, S::Queued), (true, false, S::Planned), (false, false, S::Draft)];
    for from in [S::Failed, S::Interrupted, S::Cancelled] {
        for (has_plan, has_tasks, want) in cases {
            let w = WishSnapshot { has_plan, has_tasks, ..wish(from) };
            let got = transition(&w, &E::Resume { to: None });
            assert_eq!(got, Ok(WishChange::Status(want)), "{from} {has_plan} {has_tasks}");
        }
    }
    // A fixed conflict goes back to the merge queue.
    let got = transition(&wish(S::Conflict), &E::Resume { to: None });
    assert_eq!(got, Ok(WishChange::Status(S::PendingMerge)));
}

#[test]
fn resume_never_lands_on_executing() {
    for from in WishStatus::ALL {
        for (has_plan, has_tasks) in [(true, true), (true, false), (false, false)] {
            let w = WishSnapshot { has_plan, has_tasks, ..wish(from) };
            let got = transition(&w, &E::Resume { to: None });
            assert_ne!(got, Ok(WishChange::Status(S::Executing)));
        }
    }
}

#[test]
fn an_explicit_resume_target_must_be_early_and_supported_by_the_data() {
    let resume = |w: &WishSnapshot, to| transition(w, &E::Resume { to: Some(to) });
    let full = wish(S::Failed);
    for to in [S::Draft, S::Planned, S::Queued] {
        assert_eq!(resume(&full, to), Ok(WishChange::Status(to)));
    }
    for to in WishStatus::ALL {
        if ![S::Draft, S::Planned, S::Queued].contains(&to) {
            assert_eq!(resume(&full, to), Err(WishError::InvalidResumeTarget { to }));
        }
    }
    let plan_only = WishSnapshot { has_tasks: false, ..full };
    assert_eq!(resume(&plan_only, S::Queued), Err(WishError::NeverQueued));
    let bare = WishSnapshot { has_plan: false, ..plan_only };
    assert_eq!(resume(&bare, S::Planned), Err(WishError::NoPlan));
    assert_eq!(resume(&bare, S::Draft), Ok(WishChange::Status(S::Draft)));
    // An explicit target does not make a healthy wish resumable.
    assert_eq!(resume(&wish(S::Executing), S::Queued), Err(WishError::NothingToResume { status: S::Executing }));
}

#[test]
fn errors_read_as_sentences() {
    let err = transition(&wish(S::Draft), &E::SubmitForMerge).unwrap_err();
    assert_eq!(err.to_string(), "cannot submit for merge a wish that is draft");
    let err = transition(&wish(S::Merged), &E::Cancel).unwrap_err();
    assert_eq!(err.to_string(), "cannot cancel a wish that is merged");
    let err = transition(&wish(S::Queued), &E::Resume { to: None }).unwrap_err();
    assert!(err.to_string().ends_with("this one is queued"));
}

#[test]
fn status_names_round_trip_through_from_str_display_and_serde() {
    for status in WishStatus::ALL {
        assert_eq!(status.as_str().parse::<WishStatus>(), Ok(status));
        assert_eq!(status.to_string(), status.as_str());
        let de = StrDeserializer::<DeError>::new(status.as_str());
        assert_eq!(WishStatus::deserialize(de), Ok(status));
    }
    let err = "init".parse::<WishStatus>().unwrap_err();
    assert_eq!(err.value, "init");
    assert_eq!(err.kind, "wish");
}

#[test]
fn a_slug_is_the_titles_words_within_forty_characters() {
    use super::slug_of;
    assert_eq!(slug_of("Add a login page!"), "add-a-login-page");
    assert_eq!(slug_of("Über — café"), "ber-caf");
    assert_eq!(slug_of("   "), "wish");
    let long = slug_of("make the dashboard readable on a phone and every other screen");
    assert_eq!(long, "make-the-dashboard-readable-on-a-phone");
    assert!(crate::domain::project::is_valid_slug(&long));
}

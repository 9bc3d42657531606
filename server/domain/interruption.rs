//! An agent interrupted: its pane gone (killed, its tmux server gone, the machine rebooted)
//! while its work was unreported. It is resumed into its own provider session on its own, a few
//! times with a growing wait, and told to go on; past that its work goes to a person.

use std::time::Duration;

/// Resumes after interruptions before the agent is given up (`error`, its work to a person).
pub const AUTO_RESUMES: u32 = 3;

/// Interruptions older than this are forgotten: an agent that ran well for this long after a
/// resume has the full number of resumes again.
pub const REMEMBERED: Duration = Duration::from_secs(10 * 60);

/// The wait before the resume that follows `earlier` remembered interruptions (1 s, 2 s, 4 s),
/// or `None` when the agent has had its resumes.
pub fn resume_wait(earlier: u32) -> Option<Duration> {
    (earlier < AUTO_RESUMES).then(|| Duration::from_secs(1 << earlier))
}

/// What the resumed agent is told once it is idle again.
pub fn go_on(why: &str) -> String {
    format!("Your session was interrupted ({why}): go on with your assignment, then report.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_and_ends_after_the_last_resume() {
        let waits: Vec<_> = (0..5).map(resume_wait).collect();
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(waits, [secs(1), secs(2), secs(4), None, None]);
    }

    #[test]
    fn the_agent_is_told_why_and_what_to_do() {
        assert_eq!(
            go_on("the pane vanished"),
            "Your session was interrupted (the pane vanished): go on with your assignment, then report."
        );
    }
}

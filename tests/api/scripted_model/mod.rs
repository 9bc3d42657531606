//! A scripted model endpoint on loopback: the real agent CLIs (Claude Code, Codex, Gemini CLI)
//! pointed at it read Switchyard's briefs and make real tool calls — write files, run git and
//! `switchyard` — offline and deterministic.
//!
//! One server speaks the three vendors' wire formats ([`anthropic`]: Messages, streamed and not,
//! and `count_tokens`; [`openai`]: Responses, for Codex; [`gemini`]: `generateContent` and
//! `streamGenerateContent`). Each protocol module only translates: it reads a [`Turn`] out of
//! the request (the prompt the CLI was typed, the tool results since, the working directory),
//! asks [`ScriptedModel::answer`] for the next [`Action`], and writes that action in its
//! vendor's words with the [`Usage`] the answer reports. What a diligent agent does for each
//! brief is [`script`]'s; what goes wrong on cue (a usage limit, an overload, a slow stream)
//! is [`Cue`]'s.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;

pub mod anthropic;
pub mod gemini;
pub mod openai;
pub mod script;

pub use script::Action;

/// What a CLI asked for, as the script reads it.
#[derive(Debug, Clone, Default)]
pub struct Turn {
    /// The last text a person (or Switchyard) typed: the brief, a message, a continuation.
    pub prompt: String,
    /// The outputs of the tool calls made since that prompt, oldest first.
    pub results: Vec<String>,
    /// The agent's working directory, where the CLI names it (absolute paths are made from it).
    pub cwd: Option<String>,
    /// What was typed before `prompt` in the same conversation, newest first: a resumed session
    /// sends its old turns too, so a notice to go on finds the assignment there.
    pub earlier: Vec<String>,
    /// The standing instructions the CLI sent with it (its system prompt, the memory files it
    /// read), where its format keeps them apart (Codex, Gemini CLI; empty for Claude Code).
    pub instructions: String,
}

/// The tokens one answer reports (and the log keeps, so tests can hold costs against it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Something to go wrong with the next answers, in the vendor's own words.
#[derive(Debug, Clone, PartialEq)]
pub enum Cue {
    /// A usage limit (429 with the vendor's error body and reset headers) lifting after `resets_in`.
    RateLimit { resets_in: Duration },
    /// An overloaded model (Anthropic's 529, a 503 elsewhere).
    Overload,
    /// A stream that pauses this long between its events.
    Slow { pause: Duration },
}

/// One answered request, for tests to read.
#[derive(Debug, Clone)]
pub struct Logged {
    /// `anthropic`, `openai` or `gemini`.
    pub vendor: &'static str,
    pub prompt: String,
    /// The tool results the request carried since the prompt.
    pub results: Vec<String>,
    /// What was typed before the prompt in the same conversation ([`Turn::earlier`]).
    pub earlier: Vec<String>,
    /// The standing instructions the request carried ([`Turn::instructions`]).
    pub instructions: String,
    /// What was answered; `None` when a cue answered instead.
    pub action: Option<Action>,
    pub usage: Usage,
    pub cue: Option<Cue>,
    /// When it was answered: the unattended benchmark's timeline places it (no test reads it).
    #[allow(dead_code)]
    pub at: std::time::SystemTime,
}

/// A cue for the requests whose turn matches, and how many of them are left.
type CueWhen = (Cue, usize, fn(&Turn) -> bool);

#[derive(Default)]
struct State {
    /// Cues waiting, each for as many requests as it was given.
    cues: VecDeque<(Cue, usize)>,
    /// Cues waiting for the requests whose turn matches, each for as many as it was given;
    /// taken before [`State::cues`].
    cues_when: Vec<CueWhen>,
    log: Vec<Logged>,
    /// What reviewers answer, in order (`true` = pass); when none is queued, they pass.
    verdicts: script::Verdicts,
}

/// The scripted model: clone it freely (it is shared state behind an `Arc`).
#[derive(Clone)]
pub struct ScriptedModel {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    state: Arc<Mutex<State>>,
}

/// What a protocol module gets to answer a request.
pub enum Answer {
    Act { action: Action, usage: Usage, pause: Option<Duration> },
    Cue(Cue),
}

impl ScriptedModel {
    /// Starts the endpoint on a free loopback port; it lives as long as the test's runtime.
    pub async fn start() -> ScriptedModel {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the scripted model");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let model = ScriptedModel { url, state: Arc::default() };
        let app: Router = Router::new()
            .merge(anthropic::routes())
            .merge(openai::routes())
            .merge(gemini::routes())
            .with_state(model.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.expect("the scripted model serves") });
        model
    }

    /// The next `count` requests (of any vendor) meet `cue`.
    pub fn cue(&self, cue: Cue, count: usize) {
        self.state.lock().unwrap().cues.push_back((cue, count));
    }

    /// The next `count` requests whose turn `matches` meet `cue`; other requests (a CLI's
    /// title or summary of its own) pass it by, and the cues of [`ScriptedModel::cue`] wait.
    pub fn cue_when(&self, cue: Cue, count: usize, matches: fn(&Turn) -> bool) {
        self.state.lock().unwrap().cues_when.push((cue, count, matches));
    }

    /// Reviewers answer these verdicts in order (`false`: fail with notes), then pass.
    pub fn verdicts(&self, verdicts: &[bool]) {
        self.state.lock().unwrap().verdicts.queued.extend(verdicts);
    }

    /// Every request answered so far.
    pub fn log(&self) -> Vec<Logged> {
        self.state.lock().unwrap().log.clone()
    }

    /// The answer to `turn` from `vendor`: a cue's, if one waits (a slow stream still acts),
    /// else the script's next action with its usage. Logged either way.
    pub fn answer(&self, vendor: &'static str, turn: &Turn) -> Answer {
        let mut state = self.state.lock().unwrap();
        let when = take_cue_when(&mut state.cues_when, turn);
        let cue = match state.cues.front_mut() {
            _ if when.is_some() => when,
            Some((cue, left)) => {
                let cue = cue.clone();
                *left -= 1;
                if *left == 0 {
                    state.cues.pop_front();
                }
                Some(cue)
            }
            None => None,
        };
        let pause = match cue {
            Some(Cue::Slow { pause }) => Some(pause),
            Some(cue) => {
                state.log.push(Logged {
                    vendor,
                    prompt: turn.prompt.clone(),
                    results: turn.results.clone(),
                    earlier: turn.earlier.clone(),
                    instructions: turn.instructions.clone(),
                    action: None,
                    usage: Usage::default(),
                    cue: Some(cue.clone()),
                    at: std::time::SystemTime::now(),
                });
                return Answer::Cue(cue);
            }
            None => None,
        };
        let action = script::next(turn, &mut state.verdicts);
        let usage = Usage {
            input_tokens: 1_000 + (turn.prompt.len() + turn.results.iter().map(String::len).sum::<usize>()) as u64 / 4,
            output_tokens: 20 + action.len() as u64 / 4,
        };
        state.log.push(Logged {
            vendor,
            prompt: turn.prompt.clone(),
            results: turn.results.clone(),
            earlier: turn.earlier.clone(),
            instructions: turn.instructions.clone(),
            action: Some(action.clone()),
            usage,
            cue: cue.clone(),
            at: std::time::SystemTime::now(),
        });
        Answer::Act { action, usage, pause }
    }
}

/// The first of `cues` whose turn matches `turn`, counted down (and gone at its last request).
fn take_cue_when(cues: &mut Vec<CueWhen>, turn: &Turn) -> Option<Cue> {
    let at = cues.iter().position(|(_, _, matches)| matches(turn))?;
    let cue = cues[at].0.clone();
    cues[at].1 -= 1;
    if cues[at].1 == 0 {
        cues.remove(at);
    }
    Some(cue)
}

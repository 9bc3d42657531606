//! What a diligent agent does for each of Switchyard's briefs, one action per model turn: the
//! step is the number of tool results since the prompt, so a CLI that retries a request gets the
//! same action again. After its last step the agent says it is done and stops (`end_turn`).
//!
//! | prompt begins | steps |
//! | --- | --- |
//! | `Plan the wish` | write `plan.yaml` (a group per file the wish names, else one), `switchyard wish plan --file plan.yaml` |
//! | `Your assignment: group` | write each file its goal names, commit, `switchyard group done` |
//! | `Review the wish` | `switchyard review pass`, or (a queued failing verdict) notes.md + `switchyard review fail` |
//! | `The review of the wish` | write what the notes name, commit, `switchyard fix done` |
//! | `Your assignment: the task` / `Continue (iteration` | write each file its goal names, commit, `switchyard task done` |
//! | `Your assignment: do` (a board skill) | `switchyard task done` |
//! | `Run: CMD` (a test's own) | run CMD |
//! | `Ask: QUESTION \| OPTION \| OPTION …` (a test's own) | ask QUESTION with the CLI's own question tool, offering the OPTIONs (each with a description); then say what was answered |
//! | `Run outside the sandbox: CMD` (a test's own) | run CMD, asking the CLI to run it outside its own sandbox (Codex: `sandbox_permissions: "require_escalated"`, as its instructions tell a model to when the sandbox is in the way); the others run it as `Run:` |
//! | `Your session was interrupted` | the steps of the last `Your assignment` further up the conversation, again |
//! | anything else (a message) | say it was noted |

use std::collections::{HashMap, VecDeque};

/// One model turn's worth of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write `content` to `path` (relative to the working directory unless absolute).
    Write { path: String, content: String },
    /// Run a shell command in the working directory.
    Run { command: String },
    /// Run a shell command in the working directory, outside the CLI's own sandbox.
    RunUnsandboxed { command: String },
    /// Ask the person `question` with the CLI's own question tool (Claude Code's
    /// `AskUserQuestion`, Codex's `request_user_input`, Gemini CLI's `ask_user`), offering
    /// `options`, each with a description ([`Action::description`]).
    Ask { question: String, options: Vec<String> },
    /// Say this and end the turn.
    Say(String),
}

impl Action {
    /// The action's size in bytes, for the usage it reports.
    pub fn len(&self) -> usize {
        match self {
            Action::Write { path, content } => path.len() + content.len(),
            Action::Run { command } | Action::RunUnsandboxed { command } => command.len(),
            Action::Ask { question, options } => question.len() + options.iter().map(String::len).sum::<usize>(),
            Action::Say(text) => text.len(),
        }
    }

    /// The description shown beside (or under) an option of [`Action::Ask`]: words the option's
    /// label does not hold, so a screen read for labels can tell the two apart.
    pub fn description(label: &str) -> String {
        format!("Picks {} for the test", label.to_lowercase())
    }
}

/// The action for `turn`; `verdicts` are the reviewers' answers.
pub fn next(turn: &super::Turn, verdicts: &mut Verdicts) -> Action {
    let mut prompt = unframed(&turn.prompt);
    // Told to go on after an interruption: the assignment is further up the conversation, and
    // doing it again from its first step is what a careful agent would (each step repeats safely).
    if prompt.starts_with("Your session was interrupted") {
        if let Some(assignment) = turn.earlier.iter().map(|p| unframed(p)).find(|p| p.starts_with("Your assignment")) {
            prompt = assignment;
        }
    }
    let steps = steps(prompt, turn.results.is_empty(), verdicts);
    steps.into_iter().nth(turn.results.len()).unwrap_or_else(|| Action::Say(done_text(prompt, &turn.results)))
}

/// A message's body without the line Switchyard types before it (`[message from the operator]`,
/// `[message from Switchyard]`).
pub fn unframed(prompt: &str) -> &str {
    let p = prompt.trim_start();
    match p.split_once('\n') {
        Some((first, rest)) if first.starts_with("[message from") => rest,
        _ => p,
    }
}

fn steps(prompt: &str, first: bool, verdicts: &mut Verdicts) -> Vec<Action> {
    let p = prompt.trim_start();
    if p.starts_with("Plan the wish") {
        let wish = between(p, "The wish:\n", "\n\nWrite plan.yaml").unwrap_or(p);
        vec![write("plan.yaml", &plan(wish)), run("switchyard wish plan --file plan.yaml")]
    } else if p.starts_with("Your assignment: group") {
        let key = between(p, "group `", "`").unwrap_or("work").to_owned();
        let goal = between(p, "Goal:\n", "\n\nThe wish:").unwrap_or(p);
        let mut steps = writes(goal, &key);
        steps.push(run(&format!(
            "git add -A && git commit -qm {} && switchyard group done --summary {}",
            quote(&format!("{key}: {}", one_line(goal))),
            quote(&format!("Did {}", one_line(goal)))
        )));
        steps
    } else if p.starts_with("Review the wish") {
        // The verdict is taken once, on the review's first request; a retried request (no tool
        // result yet) takes it again only if it was never taken: see `decided`.
        let pass = decided(prompt, first, verdicts);
        if pass {
            vec![run("switchyard review pass")]
        } else {
            vec![
                write("notes.md", "- review-fix.txt is missing: add it with the line `reviewed`.\n"),
                run("switchyard review fail --notes-file notes.md"),
            ]
        }
    } else if p.starts_with("The review of the wish") {
        let notes = p.split("The review's notes:\n").nth(1).unwrap_or(p);
        let mut steps = writes(notes, "review");
        steps.push(run(
            "git add -A && git commit -qm 'Fix the review notes' && switchyard fix done --summary 'Fixed the review notes'",
        ));
        steps
    } else if p.starts_with("Your assignment: the task") || p.starts_with("Continue (iteration") {
        let goal = between(p, "What to do:\n", "\n\n").unwrap_or(p);
        let mut steps = writes(goal, "task");
        steps.push(run(&format!(
            "git add -A && git commit -qm {} && switchyard task done --result {}",
            quote(&one_line(goal)),
            quote(&format!("Did {}", one_line(goal)))
        )));
        steps
    } else if p.starts_with("Your assignment: do") {
        vec![run("switchyard task done --result 'Checked: it does what the task says'")]
    } else if let Some(asked) = p.strip_prefix("Ask: ") {
        let mut parts = asked.lines().next().unwrap_or_default().split('|').map(|part| part.trim().to_owned());
        let question = parts.next().unwrap_or_default();
        vec![Action::Ask { question, options: parts.filter(|o| !o.is_empty()).collect() }]
    } else if let Some(command) = p.strip_prefix("Run outside the sandbox: ") {
        vec![Action::RunUnsandboxed { command: command.lines().next().unwrap_or_default().to_owned() }]
    } else if let Some(command) = p.strip_prefix("Run: ") {
        vec![run(command.lines().next().unwrap_or_default())]
    } else {
        Vec::new()
    }
}

/// The reviewers' verdicts: those queued (`false`: fail), and those taken, by review prompt (a
/// request retried after an overload must not take the next verdict). Each scripted model has
/// its own: tests running side by side review the same prompts.
#[derive(Debug, Default)]
pub struct Verdicts {
    pub queued: VecDeque<bool>,
    decided: HashMap<String, bool>,
}

/// The verdict on the review `prompt`: taken once, on the review's first request (`first`: no
/// tool result yet); a retried request takes it again only if it was never taken.
fn decided(prompt: &str, first: bool, verdicts: &mut Verdicts) -> bool {
    if let Some(pass) = verdicts.decided.get(prompt) {
        return *pass;
    }
    let pass = verdicts.queued.pop_front().unwrap_or(true);
    if first {
        verdicts.decided.insert(prompt.to_owned(), pass);
    }
    pass
}

/// A plan with one group per file the wish names (`Add a.txt, b.txt and c.txt`), independent of
/// each other; one group doing the whole wish when it names none.
fn plan(wish: &str) -> String {
    let files = files(wish);
    let mut yaml = String::from("groups:\n");
    if files.is_empty() {
        yaml.push_str(&format!(
            "  - key: work\n    title: The wish\n    goal: {}\n    depends_on: []\n",
            yaml_text(&one_line(wish))
        ));
    }
    for file in files {
        let key: String =
            file.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
        yaml.push_str(&format!(
            "  - key: {key}\n    title: {}\n    goal: {}\n    depends_on: []\n",
            yaml_text(&format!("Add {file}")),
            yaml_text(&format!("Add {file} saying {}", stem(&file)))
        ));
    }
    yaml
}

/// A write of each file `text` names (its content: the file's stem), or of `<fallback>.txt`.
fn writes(text: &str, fallback: &str) -> Vec<Action> {
    let mut files = files(text);
    if files.is_empty() {
        files.push(format!("{fallback}.txt"));
    }
    files.iter().map(|f| write(f, &format!("{}\n", stem(f)))).collect()
}

/// The file names in `text`: words with a short alphanumeric extension, in order, once each.
pub fn files(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || ",;:()`'\"".contains(c)) {
        let word = word.trim_end_matches('.');
        let Some((name, ext)) = word.rsplit_once('.') else { continue };
        let ok = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_/".contains(c))
            && !name.starts_with('/')
            && !name.contains("..")
            && (1..=4).contains(&ext.len())
            && ext.chars().all(|c| c.is_ascii_alphanumeric());
        if ok && !found.iter().any(|f| f == word) {
            found.push(word.to_owned());
        }
    }
    found
}

fn stem(file: &str) -> &str {
    let name = file.rsplit('/').next().unwrap_or(file);
    name.split('.').next().unwrap_or(name)
}

fn done_text(prompt: &str, results: &[String]) -> String {
    let p = unframed(prompt);
    if p.starts_with("Ask: ") {
        // The question tool's result is the answer, in the CLI's words.
        format!("Answered: {}", one_line(results.first().map_or("", String::as_str)))
    } else if p.starts_with("Your assignment") || p.starts_with("Plan the wish") {
        "Done: the work is committed and reported.".to_owned()
    } else {
        "Noted.".to_owned()
    }
}

fn write(path: &str, content: &str) -> Action {
    Action::Write { path: path.to_owned(), content: content.to_owned() }
}

fn run(command: &str) -> Action {
    Action::Run { command: command.to_owned() }
}

/// `text` between `start` and the next `end`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = &text[text.find(start)? + start.len()..];
    Some(&rest[..rest.find(end).unwrap_or(rest.len())])
}

fn one_line(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(120).collect()
}

/// `text` as one shell word.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// `text` as a YAML double-quoted scalar.
fn yaml_text(text: &str) -> String {
    serde_json::to_string(text).expect("a string")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted_model::Turn;

    fn turn(prompt: &str, results: usize) -> Turn {
        Turn { prompt: prompt.to_owned(), results: vec![String::new(); results], ..Turn::default() }
    }

    #[test]
    fn an_engineer_writes_the_files_its_goal_names_commits_and_reports() {
        let brief = switchyard::domain::briefs::engineer(
            "Letters",
            "Add a.txt",
            "a-txt",
            "Add a.txt saying a",
            "group/w/a-txt",
            &[],
        );
        let mut verdicts = Verdicts::default();
        assert_eq!(next(&turn(&brief, 0), &mut verdicts), write("a.txt", "a\n"));
        let Action::Run { command } = next(&turn(&brief, 1), &mut verdicts) else { panic!() };
        assert!(command.contains("git commit") && command.contains("switchyard group done"), "{command}");
        assert!(matches!(next(&turn(&brief, 2), &mut verdicts), Action::Say(_)));
    }

    #[test]
    fn a_brief_is_read_without_the_line_naming_its_sender() {
        let brief = switchyard::domain::briefs::planner("Letters", "Add a.txt");
        let typed = format!("[message from Switchyard]\n{brief}");
        assert_eq!(next(&turn(&typed, 0), &mut Verdicts::default()), next(&turn(&brief, 0), &mut Verdicts::default()));
        assert!(matches!(next(&turn(&typed, 0), &mut Verdicts::default()), Action::Write { .. }));
    }

    #[test]
    fn an_ask_cue_asks_its_question_with_its_options_then_says_the_answer() {
        let prompt = "[message from the operator]\nAsk: Which colour? | Red | Blue | Green";
        let asked = next(&turn(prompt, 0), &mut Verdicts::default());
        let options = vec!["Red".to_owned(), "Blue".to_owned(), "Green".to_owned()];
        assert_eq!(asked, Action::Ask { question: "Which colour?".to_owned(), options });
        let answered = Turn { results: vec!["\"Which colour?\"=\"Blue\"".to_owned()], ..turn(prompt, 0) };
        let Action::Say(said) = next(&answered, &mut Verdicts::default()) else { panic!() };
        assert!(said.starts_with("Answered: ") && said.contains("Blue"), "{said}");
    }

    #[test]
    fn a_planner_gives_a_group_per_named_file() {
        let brief = switchyard::domain::briefs::planner("Letters", "Add a.txt, b.txt and c.txt");
        let Action::Write { content, .. } = next(&turn(&brief, 0), &mut Verdicts::default()) else { panic!() };
        assert_eq!(content.matches("- key:").count(), 3, "{content}");
        assert!(content.contains("key: b-txt"), "{content}");
    }
}

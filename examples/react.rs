//! A ReAct agent: a model that reasons, searches a collection with `search_tool`,
//! reads what it found and answers, driven by `ToolLoop` through the embedded engine.
//! It prints the loop's events as they happen: each turn (the model's thought and
//! its calls), each call's outcome, the final answer.
//!
//! ```text
//! cargo run --example react                          # offline: a scripted model
//! cargo run --example react -- "your question"
//! OPENAI_API_KEY=... cargo run --example react       # OpenAI (OPENAI_MODEL, default gpt-4.1-mini)
//! OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=qwen3 cargo run --example react
//! ANTHROPIC_API_KEY=... cargo run --example react    # Anthropic (ANTHROPIC_MODEL, default claude-sonnet-4-5)
//! GEMINI_API_KEY=... cargo run --example react       # Gemini (GEMINI_MODEL, default gemini-2.5-flash)
//! ```
//!
//! The collection is a sample of CACM (titles and abstracts of Communications of the
//! ACM, 1958-1979; see `data/cacm-sample/README.md`), built into the program and
//! indexed in memory with BM25 at start.
//!
//! Without a provider's variables the model is a script, and the program says so on
//! its first line: it searches for the question's keywords (again with fewer of them
//! when nothing matched) and answers with the hits it read, citing their ids. Every
//! search and every hit printed is real; only the reasoning is scripted.

use std::error::Error;

use aaa_loop::http::{AnthropicModel, GeminiModel, OpenAiChatModel};
use aaa_loop::{
    ArgumentsOrProblem, AssistantTurn, Limits, LoopEnd, LoopEvent, Message, Model, ModelRequest,
    ProviderCall, ScriptedModel, ToolLoop, ToolResult,
};
use aaa_search::{Document, ENGLISH_STOP_WORDS, KeywordIndex, SearchTool};
use aaa_tools::{Engine, Tool, ToolHandler, ToolRegistry};
use futures::StreamExt;
use serde_json::json;

/// The collection: `id<TAB>text`, one document a line (the layout `ir_eval` reads).
const COLLECTION: &str = include_str!("data/cacm-sample/docs.tsv");

/// What the agent is asked when the command line asks nothing.
const QUESTIONS: &[&str] = &[
    "Which articles deal with TSS, the time sharing system for IBM computers?",
    "What has been written on fast recognition or parsing of context-free languages?",
];

/// The instructions a real model gets.
const SYSTEM: &str = "You answer questions about a collection of articles from \
    Communications of the ACM (1958-1979). Work in steps: think about what to look \
    for, search the collection with the search_documents tool, read the results, \
    search again with other words if they do not answer the question. Answer only \
    from what you found, cite the ids of the articles you use (e.g. CACM-1410), and \
    say so when the collection has nothing on the question.";

/// The most searches the scripted model makes for one question.
const SCRIPTED_SEARCHES: usize = 3;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let (model, about) = choose_model()?;
    println!("{about}");

    let search = search_tool()?;
    let engine = Engine::embedded();
    let _worker = ToolHandler::new(ToolRegistry::new([search.clone()])?)
        .attach(&engine)
        .await?;
    let agent = ToolLoop::new(model, [search]).with_limits(Limits::default().with_max_turns(8));

    let asked: Vec<String> = std::env::args().skip(1).collect();
    let questions = if asked.is_empty() {
        QUESTIONS.iter().map(|q| q.to_string()).collect()
    } else {
        vec![asked.join(" ")]
    };
    for question in questions {
        println!("\nquestion: {question}");
        let input = vec![Message::system(SYSTEM), Message::user(question)];
        let mut events = agent.run_stream(&engine.new_run(), input);
        while let Some(event) = events.next().await {
            show(&event)?;
        }
    }
    Ok(())
}

/// The model the variables ask for, and a line saying which it is.
fn choose_model() -> Result<(Box<dyn Model>, String), Box<dyn Error>> {
    let set = |name: &str| std::env::var(name).is_ok_and(|value| !value.is_empty());
    let or = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    if set("OPENAI_API_KEY") || set("OPENAI_BASE_URL") {
        let name = or("OPENAI_MODEL", "gpt-4.1-mini");
        let model = OpenAiChatModel::from_env(name.as_str()).build()?;
        let url = or("OPENAI_BASE_URL", OpenAiChatModel::DEFAULT_BASE_URL);
        return Ok((
            Box::new(model),
            format!("model: {name} at {url} (OpenAI Chat Completions)"),
        ));
    }
    if set("ANTHROPIC_API_KEY") {
        let name = or("ANTHROPIC_MODEL", "claude-sonnet-4-5");
        let model = AnthropicModel::from_env(name.as_str()).build()?;
        return Ok((
            Box::new(model),
            format!("model: {name} (Anthropic Messages)"),
        ));
    }
    if set("GEMINI_API_KEY") {
        let name = or("GEMINI_MODEL", "gemini-2.5-flash");
        let model = GeminiModel::from_env(name.as_str()).build()?;
        return Ok((Box::new(model), format!("model: {name} (Google Gemini)")));
    }
    let about = "model: scripted, offline (set OPENAI_API_KEY, OPENAI_BASE_URL, \
                 ANTHROPIC_API_KEY or GEMINI_API_KEY to use a real one)";
    Ok((
        Box::new(ScriptedModel::from_fn(scripted_step)),
        about.into(),
    ))
}

/// The collection, indexed, as the `search_documents` tool.
fn search_tool() -> Result<Tool, Box<dyn Error>> {
    let index = KeywordIndex::in_memory()?;
    let documents = COLLECTION
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(id, text)| Document::new(id, text));
    let added = index.add(documents)?;
    let description = format!(
        "Search {added} articles of Communications of the ACM (1958-1979): titles, \
         abstracts, issue and authors. Returns the best matches first, each with its \
         id (CACM-nnnn), score and text. Query with plain keywords."
    );
    Ok(SearchTool::new(index)
        .description(description)
        .k(3)
        .max_chars(240)
        .build()?)
}

/// Prints one event of the loop.
fn show(event: &LoopEvent) -> Result<(), Box<dyn Error>> {
    match event {
        LoopEvent::Resumed { turns } => println!("  resumed after {turns} recorded turns"),
        LoopEvent::Turn { turn, assistant } => {
            if !assistant.has_calls() {
                // Its text comes next, as the final answer.
                println!("  turn {turn}: the answer");
                return Ok(());
            }
            println!("  turn {turn}:");
            for line in assistant.text.iter().flat_map(|text| text.lines()) {
                println!("    | {line}");
            }
            for call in &assistant.calls {
                let arguments = match &call.arguments {
                    ArgumentsOrProblem::Arguments(map) => serde_json::to_string(map)?,
                    ArgumentsOrProblem::Problem(problem) => format!("(unreadable: {problem})"),
                    other => format!("{other:?}"),
                };
                println!("    call {} {arguments}", call.name);
            }
        }
        LoopEvent::CallRequested { call_id, .. } => println!("  requested {call_id}"),
        LoopEvent::Outcome {
            call_id, result, ..
        } => {
            println!("  outcome of {call_id}:");
            let text = result.outcome.for_model();
            for line in text.lines().filter(|line| !line.is_empty()) {
                println!("    > {}", opening_chars(line, 100));
            }
        }
        LoopEvent::Final(answer) => {
            println!("answer:");
            for line in answer.lines() {
                println!("  {line}");
            }
        }
        LoopEvent::Ended(Ok(result)) => {
            let end = match &result.end {
                LoopEnd::Final(_) => "a final answer".to_owned(),
                other => format!("{other:?}"),
            };
            let tokens = match result.usage.total_tokens() {
                0 => String::new(),
                tokens => format!(", tokens: {tokens}"),
            };
            println!(
                "  ended with {end}; turns: {}, tool calls: {}{tokens}",
                result.turns, result.tool_calls
            );
        }
        LoopEvent::Ended(Err(error)) => return Err(error.clone().into()),
        other => println!("  {other:?}"),
    }
    Ok(())
}

/// The scripted model's turn: a fixed ReAct policy over the conversation so far.
///
/// It searches for the question's keywords; when a search found nothing it tries
/// again with fewer of them (up to [`SCRIPTED_SEARCHES`] searches); then it answers
/// from the hits it read, citing their ids.
fn scripted_step(request: &ModelRequest) -> AssistantTurn {
    let question = request
        .messages
        .iter()
        .rev()
        .find_map(|message| match message {
            Message::User(text) => Some(text.as_str()),
            _ => None,
        })
        .unwrap_or_default();
    let results: Vec<&ToolResult> = request
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::ToolResults(results) => Some(results),
            _ => None,
        })
        .flatten()
        .collect();
    let hits: Vec<(String, String)> = results
        .iter()
        .flat_map(|result| hits_in(&result.outcome.for_model()))
        .collect();
    let words = keywords(question);
    if hits.is_empty() && results.len() < SCRIPTED_SEARCHES && !words.is_empty() {
        // Fewer words each time: all of them, then half, then the longest.
        let query = match results.len() {
            0 => words.join(" "),
            1 => words[..words.len().div_ceil(2)].join(" "),
            _ => words
                .iter()
                .max_by_key(|w| w.len())
                .cloned()
                .unwrap_or_default(),
        };
        let thought = match results.len() {
            0 => format!("Thought: I will search the collection for {query:?}."),
            _ => format!("Thought: nothing matched; I will try fewer words: {query:?}."),
        };
        let arguments = ArgumentsOrProblem::from_value(json!({ "query": query }));
        let id = format!("call_{}", request.turn);
        let call = ProviderCall::new(id, "search_documents", arguments);
        let mut turn = AssistantTurn::tool_calls([call]);
        turn.text = Some(thought);
        return turn;
    }
    if hits.is_empty() {
        return AssistantTurn::answer(format!(
            "Thought: {} searches found nothing.\nAnswer: the collection has no article on this.",
            results.len()
        ));
    }
    let cited: Vec<String> = hits
        .iter()
        .map(|(id, text)| format!("{id} ({})", opening(text, 12)))
        .collect();
    AssistantTurn::answer(format!(
        "Thought: the search found {} articles; the best matches answer the question.\n\
         Answer: the collection's best matches are {}.",
        hits.len(),
        cited.join("; ")
    ))
}

/// The question's words worth searching for: lowercase, without stop words, the
/// words of a question ([`ASKING`]) and words of one or two letters.
fn keywords(question: &str) -> Vec<String> {
    question
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .map(str::to_lowercase)
        .filter(|word| word.chars().count() > 2)
        .filter(|word| !ENGLISH_STOP_WORDS.contains(&word.as_str()))
        .filter(|word| !ASKING.contains(&word.as_str()))
        .collect()
}

/// Words that ask rather than say what to look for.
const ASKING: &[&str] = &[
    "what",
    "which",
    "who",
    "how",
    "why",
    "when",
    "where",
    "does",
    "did",
    "has",
    "have",
    "been",
    "any",
    "articles",
    "papers",
    "written",
    "published",
    "deal",
    "about",
];

/// The hits in a search result's text, as `(id, text)`: each hit is a line
/// `[n] id: <id> | ... | score: <score>` followed by its text.
fn hits_in(result: &str) -> Vec<(String, String)> {
    let mut hits = Vec::new();
    let mut lines = result.lines();
    while let Some(line) = lines.next() {
        let Some((_, rest)) = line.split_once("] id: ") else {
            continue;
        };
        let id = rest.split(" | ").next().unwrap_or(rest).to_owned();
        let text = lines.next().unwrap_or_default().to_owned();
        hits.push((id, text));
    }
    hits
}

/// `line` cut to its first `chars` characters, with an ellipsis when it is longer.
fn opening_chars(line: &str, chars: usize) -> String {
    match line.char_indices().nth(chars) {
        Some((at, _)) => format!("{} ...", &line[..at]),
        None => line.to_owned(),
    }
}

/// The first `words` words of `text`, with an ellipsis when there are more.
fn opening(text: &str, words: usize) -> String {
    let all: Vec<&str> = text.split_whitespace().collect();
    if all.len() > words {
        format!("{} ...", all[..words].join(" "))
    } else {
        all.join(" ")
    }
}

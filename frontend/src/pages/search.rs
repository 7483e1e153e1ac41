//! Search: a query box, the mode switch and the relevance banner; each result with its
//! title, section, page, ranks and full text, linking to the passage in its document; and
//! "Answer", which shows the answer with numbered citations. The query lives in the URL
//! (`/search?q=…&mode=…`), so a reload or a shared link shows the same results.

use leptos::html::Input;
use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_query_map};
use leptos_router::NavigateOptions;
use serde::Deserialize;
use serde_json::json;

use crate::components::{error_view, loading_view, url_encode, Shell};
use crate::session::Session;

const SEARCH: &str = "query($q: String!, $mode: SearchMode!) { search(query: $q, mode: $mode, topK: 10) { \
mode relevance topScore meanScore notices results { chunkId documentId documentTitle version chunkIndex \
section page content score vectorRank lexicalRank fusedScore } } }";
const ANSWER: &str = "query($q: String!) { answer(question: $q) { answer extractive relevance \
citations { number documentId documentTitle version section page excerpt } \
usage { model inputTokens outputTokens costUsd } } }";

const MODES: [(&str, &str); 3] = [
    ("HYBRID", "Hybrid"),
    ("VECTOR", "Meaning"),
    ("LEXICAL", "Words"),
];

#[derive(Clone, Debug, Deserialize)]
struct SearchData {
    search: SearchResult,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SearchResult {
    relevance: String,
    top_score: f64,
    notices: Vec<String>,
    results: Vec<Hit>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Hit {
    chunk_id: String,
    document_id: String,
    document_title: String,
    version: u32,
    section: Option<String>,
    page: Option<u32>,
    content: String,
    score: f64,
    vector_rank: Option<u32>,
    lexical_rank: Option<u32>,
    fused_score: f64,
}

#[derive(Clone, Debug, Deserialize)]
struct AnswerData {
    answer: Answer,
}

#[derive(Clone, Debug, Deserialize)]
struct Answer {
    answer: String,
    extractive: bool,
    citations: Vec<Citation>,
    usage: Option<Usage>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Citation {
    number: u32,
    document_id: String,
    document_title: String,
    version: u32,
    section: Option<String>,
    page: Option<u32>,
    excerpt: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    model: String,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: f64,
}

#[component]
pub fn SearchPage(session: Session) -> impl IntoView {
    view! {
        <Shell session>
            <SearchView session />
        </Shell>
    }
}

#[component]
fn SearchView(session: Session) -> impl IntoView {
    let query = use_query_map();
    let q = Memo::new(move |_| query.read().get("q").unwrap_or_default());
    let mode = Memo::new(move |_| {
        query
            .read()
            .get("mode")
            .filter(|m| MODES.iter().any(|(v, _)| v == m))
            .unwrap_or_else(|| "HYBRID".to_owned())
    });
    let results = LocalResource::new(move || {
        let (q, mode) = (q.get(), mode.get());
        async move {
            if q.trim().is_empty() {
                return Ok(None);
            }
            session
                .gql::<SearchData>(SEARCH, json!({ "q": q, "mode": mode }))
                .await
                .map(Some)
        }
    });
    // The answer remembers its question: a new query hides an answer to the old one.
    let answer = Action::new_local(move |question: &String| {
        let question = question.clone();
        async move {
            let a = session
                .gql::<AnswerData>(ANSWER, json!({ "q": question }))
                .await;
            (question, a)
        }
    });
    let input = NodeRef::<Input>::new();
    let navigate = use_navigate();
    let go = move |text: String, mode: String| {
        let url = format!("/search?q={}&mode={}", url_encode(&text), url_encode(&mode));
        navigate(&url, NavigateOptions::default());
    };
    let submit_go = go.clone();
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let text = input
            .get_untracked()
            .map(|i| i.value().trim().to_owned())
            .unwrap_or_default();
        if !text.is_empty() {
            submit_go(text, mode.get_untracked());
        }
    };
    let mode_buttons = MODES
        .iter()
        .map(|(value, label)| {
            let value = *value;
            let go = go.clone();
            view! {
                <button type="button" class="segment" id=format!("mode-{}", value.to_lowercase())
                    aria-pressed=move || (mode.get() == value).to_string()
                    on:click=move |_| {
                        let text = q.get_untracked();
                        if text.trim().is_empty() {
                            go(String::new(), value.to_owned());
                        } else {
                            go(text, value.to_owned());
                        }
                    }>{*label}</button>
            }
        })
        .collect_view();
    let listing = move || match results.get() {
        None => loading_view(),
        Some(Err(e)) => error_view(&e),
        Some(Ok(None)) => {
            view! { <p class="muted">"Search the documents you can read."</p> }.into_any()
        }
        Some(Ok(Some(data))) => results_view(data.search),
    };
    let answer_view = move || {
        if answer.pending().get() {
            return Some(
                view! { <p class="muted" id="answer-pending">"Answering…"</p> }.into_any(),
            );
        }
        match answer.value().get() {
            Some((question, _)) if question != q.get() => None,
            None => None,
            Some((_, Err(e))) => Some(
                view! { <div id="answer" class="card answer">{error_view(&e)}</div> }.into_any(),
            ),
            Some((_, Ok(a))) => Some(answer_card(a.answer)),
        }
    };
    view! {
        <h2>"Search"</h2>
        <form id="search-form" class="search-form" on:submit=on_submit>
            <input id="search-input" node_ref=input type="search" placeholder="Ask or search…"
                prop:value=move || q.get() maxlength="2000" aria-label="Query" />
            <button id="search-button" type="submit">"Search"</button>
            <button id="answer-button" type="button" class="secondary"
                disabled=move || answer.pending().get() || q.get().trim().is_empty()
                on:click=move |_| { answer.dispatch(q.get_untracked()); }>"Answer"</button>
        </form>
        <div class="segments" role="group" aria-label="Mode">{mode_buttons}</div>
        {answer_view}
        {listing}
    }
}

fn results_view(result: SearchResult) -> AnyView {
    let (banner_class, banner_text) = match result.relevance.as_str() {
        "HIGH" => ("banner high", "Strong matches."),
        "MODERATE" => (
            "banner moderate",
            "Partial matches: the answer may not be here.",
        ),
        "LEXICAL_MATCH" => ("banner lexical", "Matched by words rather than meaning."),
        _ => ("banner low", "The documents do not seem to contain this."),
    };
    let notices = result
        .notices
        .into_iter()
        .map(|n| view! { <p class="notice">{n}</p> })
        .collect_view();
    let empty = result.results.is_empty();
    let hits = result
        .results
        .into_iter()
        .enumerate()
        .map(|(i, h)| hit_view(i + 1, h))
        .collect_view();
    view! {
        <p id="relevance-banner" class=banner_class data-relevance=result.relevance.clone()>
            <strong>{result.relevance.replace('_', " ").to_lowercase()}</strong> " · " {banner_text}
            <span class="muted">{format!(" top cosine {:.2}", result.top_score)}</span>
        </p>
        {notices}
        {empty.then(|| view! { <p class="muted" id="no-results">"Nothing found."</p> })}
        <ol id="search-results" class="results">{hits}</ol>
    }
    .into_any()
}

fn hit_view(rank: usize, h: Hit) -> impl IntoView {
    let href = format!(
        "/documents/{}?version={}&highlight={}",
        h.document_id,
        h.version,
        url_encode(&passage_of(&h.content))
    );
    let place = [
        h.section.clone(),
        h.page.map(|p| format!("page {p}")),
        Some(format!("v{}", h.version)),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" · ");
    let ranks = format!(
        "#{rank} · vector {} · words {} · cosine {:.3} · fused {:.4}",
        h.vector_rank.map_or("–".to_owned(), |r| r.to_string()),
        h.lexical_rank.map_or("–".to_owned(), |r| r.to_string()),
        h.score,
        h.fused_score
    );
    view! {
        <li class="result card" data-chunk=h.chunk_id>
            <div class="result-head">
                <a class="result-link" href=href>{h.document_title}</a>
                <span class="muted place">{place}</span>
            </div>
            <p class="ranks muted small">{ranks}</p>
            <pre class="excerpt">{h.content}</pre>
        </li>
    }
}

fn answer_card(a: Answer) -> AnyView {
    let citations = a
        .citations
        .into_iter()
        .map(|c| {
            let href = format!(
                "/documents/{}?version={}&highlight={}",
                c.document_id,
                c.version,
                url_encode(&passage_of(&c.excerpt))
            );
            let place = [
                c.section,
                c.page.map(|p| format!("page {p}")),
                Some(format!("v{}", c.version)),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" · ");
            view! {
                <li class="citation" id=format!("citation-{}", c.number) value=c.number>
                    <a href=href>{c.document_title}</a>
                    <span class="muted place">{place}</span>
                    <blockquote>{c.excerpt}</blockquote>
                </li>
            }
        })
        .collect_view();
    let usage = a.usage.map(|u| {
        view! {
            <p class="muted small">{format!(
                "{} · {} in / {} out tokens · ${:.5}",
                u.model, u.input_tokens, u.output_tokens, u.cost_usd
            )}</p>
        }
    });
    view! {
        <section id="answer" class="card answer">
            <h3>"Answer"</h3>
            <div class="answer-text" data-extractive=a.extractive.to_string()>{answer_blocks(&a.answer)}</div>
            <ol class="citations">{citations}</ol>
            {usage}
        </section>
    }
    .into_any()
}

/// The answer's paragraphs (`> ` lines as quotes), with each `[n]` linked to citation n.
fn answer_blocks(text: &str) -> AnyView {
    text.split("\n\n")
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(|block| match block.strip_prefix("> ") {
            Some(quote) => {
                view! { <blockquote class="quote">{with_markers(quote)}</blockquote> }.into_any()
            }
            None => view! { <p>{with_markers(block)}</p> }.into_any(),
        })
        .collect_view()
        .into_any()
}

/// Text with `[n]` citation markers turned into links to `#citation-n`.
fn with_markers(text: &str) -> AnyView {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with(']') {
            let n = &after[..digits];
            parts.push(view! { {rest[..open].to_owned()} }.into_any());
            parts.push(
                view! { <a class="marker" href=format!("#citation-{n}")>{format!("[{n}]")}</a> }
                    .into_any(),
            );
            rest = &after[digits + 1..];
        } else {
            parts.push(view! { {rest[..=open].to_owned()} }.into_any());
            rest = after;
        }
    }
    parts.push(view! { {rest.to_owned()} }.into_any());
    parts.into_iter().collect_view().into_any()
}

/// The part of a chunk to mark in the document: its first paragraph that is not a heading,
/// at most about 200 characters (whole words).
pub fn passage_of(content: &str) -> String {
    let paragraph = content
        .split("\n\n")
        .map(str::trim)
        .find(|p| !p.is_empty() && !p.starts_with('#'))
        .unwrap_or(content);
    let words: Vec<&str> = paragraph.split_whitespace().collect();
    let mut out = String::new();
    for w in words {
        if !out.is_empty() && out.len() + w.len() + 1 > 200 {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passage_skips_headings_and_is_bounded() {
        assert_eq!(passage_of("# Title\n\nBody text here."), "Body text here.");
        let long = "word ".repeat(100);
        assert!(passage_of(&long).len() <= 200);
    }
}

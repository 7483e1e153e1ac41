//! A document: its text page by page with the section headings, its versions, and
//! `?highlight=` (a mention's snippet, a search hit's passage) marked and scrolled to.
//! `?version=` says which version the link cites; the text shown is always the current one
//! (older versions' text is not kept), and the page says so when they differ.

use leptos::prelude::*;
use leptos_router::hooks::{use_navigate, use_params_map, use_query_map};
use leptos_router::NavigateOptions;
use serde::Deserialize;
use serde_json::json;

use crate::api::ApiError;
use crate::components::{count, error_view, loading_view, url_encode, Shell};
use crate::session::Session;

const DOCUMENT: &str = "query($id: ID!, $page: Int!) { \
document(id: $id) { id title filename mimeType visibility currentVersion chunkCount ownerName \
corpus { id name } versions { version extractedChars createdAt size } \
classification { type confidence method reason } processing { type extendedTaxonomy } } \
documentText(id: $id, page: $page) { version page pageCount text } }";

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DocumentData {
    document: Option<DocumentDetail>,
    document_text: TextPage,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DocumentDetail {
    id: String,
    title: String,
    filename: Option<String>,
    mime_type: String,
    visibility: String,
    current_version: u32,
    chunk_count: u64,
    owner_name: Option<String>,
    corpus: Option<CorpusName>,
    versions: Vec<Version>,
    classification: Option<ClassificationView>,
    processing: Option<ProcessingView>,
}

/// The current version's type (`classifyDocument`, `processDocument`).
#[derive(Clone, Debug, Deserialize)]
struct ClassificationView {
    #[serde(rename = "type")]
    doc_type: String,
    confidence: f64,
    method: String,
    reason: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProcessingView {
    #[serde(rename = "type")]
    doc_type: String,
    extended_taxonomy: bool,
}

#[derive(Clone, Debug, Deserialize)]
struct CorpusName {
    id: String,
    name: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Version {
    version: u32,
    extracted_chars: u64,
    created_at: String,
    size: Option<u64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TextPage {
    page: u32,
    page_count: u32,
    text: String,
}

/// A loaded page and whether the highlight was found on it.
#[derive(Clone, Debug)]
struct Loaded {
    data: DocumentData,
    found: bool,
}

#[component]
pub fn DocumentPage(session: Session) -> impl IntoView {
    view! {
        <Shell session>
            <DocumentView session />
        </Shell>
    }
}

#[component]
fn DocumentView(session: Session) -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let highlight = Memo::new(move |_| {
        query
            .read()
            .get("highlight")
            .filter(|h| !h.trim().is_empty())
    });
    let cited_version = Memo::new(move |_| {
        query
            .read()
            .get("version")
            .and_then(|v| v.parse::<u32>().ok())
    });
    // None: the first page, or the page holding the highlight. In the URL, so a new document
    // starts afresh and a reload keeps the page.
    let page = Memo::new(move |_| query.read().get("page").and_then(|p| p.parse::<u32>().ok()));
    let navigate = use_navigate();
    let go_to_page = move |n: u32| {
        let mut params: Vec<String> = Vec::new();
        if let Some(h) = highlight.get_untracked() {
            params.push(format!("highlight={}", url_encode(&h)));
        }
        if let Some(v) = cited_version.get_untracked() {
            params.push(format!("version={v}"));
        }
        params.push(format!("page={n}"));
        navigate(
            &format!("/documents/{}?{}", id.get_untracked(), params.join("&")),
            NavigateOptions::default(),
        );
    };
    let loaded = LocalResource::new(move || {
        let id = id.get();
        let wanted = highlight.get();
        let page = page.get();
        async move { load(session, id, page, wanted).await }
    });
    // Scroll the mark into view once the text is on screen.
    Effect::new(move || {
        if let Some(Ok(l)) = loaded.get() {
            if l.found {
                request_animation_frame(scroll_to_highlight);
            }
        }
    });
    move || match loaded.get() {
        None => loading_view(),
        Some(Err(e)) => error_view(&e),
        Some(Ok(Loaded {
            data: DocumentData { document: None, .. },
            ..
        })) => error_view(&ApiError::local(
            "This document does not exist or is not visible to you.",
        )),
        Some(Ok(Loaded {
            data:
                DocumentData {
                    document: Some(doc),
                    document_text: text,
                },
            found,
        })) => {
            let wanted = highlight.get_untracked();
            let blocks = render_text(&text.text, wanted.as_deref());
            let missing = wanted.is_some() && !found;
            let cited = cited_version.get_untracked();
            let version_note = cited.filter(|v| *v != doc.current_version).map(|v| {
                view! {
                    <p class="notice" id="version-notice">
                        {format!("The link cites version {v}; this is the text of the current version {}.", doc.current_version)}
                    </p>
                }
            });
            let pager = (text.page_count > 1).then(|| {
                let (prev, next) = (go_to_page.clone(), go_to_page.clone());
                let current = text.page;
                let last = text.page_count;
                view! {
                    <nav class="pager" aria-label="Pages">
                        <button type="button" class="secondary small" id="page-prev" disabled={current <= 1}
                            on:click=move |_| prev(current - 1)>"Previous"</button>
                        <span id="page-indicator">{format!("Page {current} of {last}")}</span>
                        <button type="button" class="secondary small" id="page-next" disabled={current >= last}
                            on:click=move |_| next(current + 1)>"Next"</button>
                    </nav>
                }
            });
            let versions = doc
                .versions
                .iter()
                .rev()
                .map(|v| {
                    let current = v.version == doc.current_version;
                    let cited_here = cited == Some(v.version);
                    let when = v
                        .created_at
                        .get(..16)
                        .unwrap_or(&v.created_at)
                        .replace('T', " ");
                    view! {
                        <li class:current=current class:cited=cited_here data-version=v.version>
                            <strong>{format!("v{}", v.version)}</strong>
                            <span class="muted">{when}</span>
                            <span class="muted">{format!("{} characters", v.extracted_chars)}</span>
                            {v.size.map(|s| view! { <span class="muted">{format_size(s)}</span> })}
                            {current.then(|| view! { <span class="tag">"current"</span> })}
                            {cited_here.then(|| view! { <span class="tag cited">"cited"</span> })}
                        </li>
                    }
                })
                .collect_view();
            view! {
                <p class="crumbs">
                    <a href="/">"Corpora"</a>
                    {doc.corpus.map(|c| view! { " / " <a href=format!("/corpora/{}", c.id)>{c.name}</a> })}
                </p>
                <div class="page-head">
                    <h2 id="document-title" data-id=doc.id>{doc.title}</h2>
                    <span class="counts">
                        <span class="tag">{doc.visibility.to_lowercase()}</span>
                        <span>{format!("v{}", doc.current_version)}</span>
                        <span>{count(doc.chunk_count, "chunk")}</span>
                    </span>
                </div>
                <p class="muted small meta">
                    {doc.filename.unwrap_or_default()} " · " {doc.mime_type}
                    {doc.owner_name.map(|o| format!(" · uploaded by {o}"))}
                </p>
                {version_note}
                {missing.then(|| view! { <p class="notice" id="highlight-missing">"The quoted passage is not in the current text."</p> })}
                <div class="document-layout">
                    <article id="document-text" class="document-text card" data-page=text.page>{blocks}</article>
                    <aside class="versions card">
                        <h3>"Versions"</h3>
                        <ul id="versions-list">{versions}</ul>
                        <h3>"Type"</h3>
                        {type_view(doc.classification, doc.processing)}
                    </aside>
                </div>
                {pager}
            }
            .into_any()
        }
    }
}

/// The document's type: its classification (how sure, by what, why) and, when it was
/// processed as another type (a new one the taxonomy gained), that one.
fn type_view(c: Option<ClassificationView>, p: Option<ProcessingView>) -> AnyView {
    let processed = p.map(|p| {
        let note = if p.extended_taxonomy {
            format!(
                "Processed as {} (a type this document added to the taxonomy).",
                p.doc_type
            )
        } else {
            format!("Processed as {}.", p.doc_type)
        };
        view! { <p class="muted small" id="doc-processed">{note}</p> }
    });
    match c {
        Some(c) => {
            let how = if c.method == "LLM" { "model" } else { "zero-shot" };
            view! {
                <p id="doc-type">
                    <span class="tag">{c.doc_type}</span>
                    " "
                    <span class="muted">{format!("{:.0}% · {how}", c.confidence * 100.0)}</span>
                </p>
                <p class="muted small" id="doc-type-reason">{c.reason}</p>
                {processed}
            }
            .into_any()
        }
        None => view! {
            <p class="muted small" id="doc-type">"Not classified yet (classifyDocument or processDocument)."</p>
            {processed}
        }
        .into_any(),
    }
}

/// Loads `page`, or, with a highlight and no page chosen, the first page that holds it.
async fn load(
    session: Session,
    id: String,
    page: Option<u32>,
    wanted: Option<String>,
) -> Result<Loaded, ApiError> {
    let mut n = page.unwrap_or(1);
    loop {
        let data: DocumentData = session
            .gql(DOCUMENT, json!({ "id": id, "page": n }))
            .await?;
        let found = wanted
            .as_deref()
            .is_some_and(|w| locate(&data.document_text.text, w).is_some());
        let last = data.document_text.page_count;
        if found || wanted.is_none() || page.is_some() || n >= last {
            // Not found anywhere: show the first page.
            if !found && wanted.is_some() && page.is_none() && n > 1 {
                let first = session
                    .gql(DOCUMENT, json!({ "id": id, "page": 1 }))
                    .await?;
                return Ok(Loaded {
                    data: first,
                    found: false,
                });
            }
            return Ok(Loaded { data, found });
        }
        n += 1;
    }
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Where the highlight is: the block index and the byte range in that block's collapsed text.
/// Whitespace is compared collapsed (extraction and chunking may re-flow lines); a passage
/// that spans blocks is found by its longest leading part that one block holds.
fn locate(text: &str, wanted: &str) -> Option<(usize, usize, usize)> {
    let wanted = collapse(wanted);
    if wanted.is_empty() {
        return None;
    }
    let blocks: Vec<String> = text.split("\n\n").map(collapse).collect();
    if let Some(hit) = blocks
        .iter()
        .enumerate()
        .find_map(|(i, b)| b.find(&wanted).map(|at| (i, at, at + wanted.len())))
    {
        return Some(hit);
    }
    // The leading part (at least 40 characters, cut at a word boundary).
    let words: Vec<&str> = wanted.split(' ').collect();
    for keep in (1..words.len()).rev() {
        let head = words[..keep].join(" ");
        if head.chars().count() < 40 {
            break;
        }
        if let Some(hit) = blocks
            .iter()
            .enumerate()
            .find_map(|(i, b)| b.find(&head).map(|at| (i, at, at + head.len())))
        {
            return Some(hit);
        }
    }
    None
}

/// The page's text as headings (`#` lines) and paragraphs, with the highlight marked.
fn render_text(text: &str, wanted: Option<&str>) -> AnyView {
    let hit = wanted.and_then(|w| locate(text, w));
    text.split("\n\n")
        .enumerate()
        .filter(|(_, b)| !b.trim().is_empty())
        .map(|(i, block)| {
            let trimmed = block.trim();
            if let Some(heading) = heading_of(trimmed) {
                return view! { <h3 class="section-heading">{heading.to_owned()}</h3> }.into_any();
            }
            // A chunk's first line may be its heading, followed by its body.
            let (head, body) = match trimmed.split_once('\n') {
                Some((first, rest)) if heading_of(first).is_some() => (heading_of(first), rest),
                _ => (None, trimmed),
            };
            let flat = collapse(body);
            let paragraph = match hit {
                Some((at_block, from, to)) if at_block == i && head.is_none() => view! {
                    <p>{flat[..from].to_owned()}<mark id="highlight">{flat[from..to].to_owned()}</mark>{flat[to..].to_owned()}</p>
                }
                .into_any(),
                Some((at_block, _, _)) if at_block == i => {
                    // The collapsed block included the heading line: re-find in the body.
                    match locate(body, wanted.unwrap_or_default()) {
                        Some((_, from, to)) => view! {
                            <p>{flat[..from].to_owned()}<mark id="highlight">{flat[from..to].to_owned()}</mark>{flat[to..].to_owned()}</p>
                        }
                        .into_any(),
                        None => view! { <p><mark id="highlight">{flat}</mark></p> }.into_any(),
                    }
                }
                _ => view! { <p>{flat}</p> }.into_any(),
            };
            match head {
                Some(h) => view! { <h3 class="section-heading">{h.to_owned()}</h3> {paragraph} }.into_any(),
                None => paragraph,
            }
        })
        .collect_view()
        .into_any()
}

/// `# Title` → `Title` (one to six `#`, then a space).
fn heading_of(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches('#');
    let level = line.len() - rest.len();
    ((1..=6).contains(&level) && rest.starts_with(' ') && !line.contains('\n'))
        .then(|| rest.trim())
        .filter(|h| !h.is_empty())
}

fn scroll_to_highlight() {
    let Some(mark) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id("highlight"))
    else {
        return;
    };
    let options = web_sys::ScrollIntoViewOptions::new();
    options.set_block(web_sys::ScrollLogicalPosition::Center);
    mark.scroll_into_view_with_scroll_into_view_options(&options);
}

fn format_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.0} KB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_snippet_across_reflowed_whitespace() {
        let text = "# Intro\n\nAcme Robotics is\nbased in   Berlin. More.\n\nOther.";
        let (block, from, to) = locate(text, "Acme Robotics is based in Berlin.").unwrap();
        assert_eq!(block, 1);
        assert_eq!(
            &collapse("Acme Robotics is\nbased in   Berlin. More.")[from..to],
            "Acme Robotics is based in Berlin."
        );
    }

    #[test]
    fn a_passage_spanning_blocks_is_found_by_its_head() {
        let text = "First paragraph with a long enough opening sentence here.\n\nSecond one.";
        let wanted = "First paragraph with a long enough opening sentence here. Second one.";
        assert_eq!(locate(text, wanted).map(|h| h.0), Some(0));
        assert_eq!(locate(text, "nowhere at all"), None);
    }

    #[test]
    fn headings_are_recognised() {
        assert_eq!(heading_of("## Setup"), Some("Setup"));
        assert_eq!(heading_of("#hashtag"), None);
        assert_eq!(heading_of("####### seven"), None);
    }
}

//! The entity browser: name search (name match fused with meaning), a type filter, pages of
//! 25; and "Extract now", which starts a knowledge extraction and shows its live progress.
//! The search and filter live in the URL (`/knowledge?q=…&type=…`).

use leptos::html::{Input, Select};
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::hooks::{use_navigate, use_query_map};
use leptos_router::NavigateOptions;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::{Connection, CorpusRef, Page};
use crate::components::JobRef;
use crate::components::{
    error_view, loading_view, url_encode, Cursors, JobBar, JobWatch, PagerNav, Shell,
};
use crate::session::Session;

const PAGE: usize = 25;
const ENTITIES: &str = "query($q: String, $t: String, $first: Int!, $after: String) { \
entities(q: $q, type: $t, first: $first, after: $after) { pageInfo { hasNextPage endCursor } \
edges { node { id name type description } } } }";
const CORPORA: &str = "{ corpora(first: 100) { edges { node { id name system } } } }";
const EXTRACT: &str = "mutation($c: ID) { extractKnowledge(corpusId: $c) { id kind state stage } }";
/// The starter vocabulary of cairn-kg (the type list is open: other types can be given in the
/// URL, `?type=…`).
const TYPES: [&str; 6] = [
    "person",
    "organization",
    "product",
    "place",
    "event",
    "concept",
];

#[derive(Clone, Debug, Deserialize)]
struct EntitiesData {
    entities: Page<EntityRow>,
}

#[derive(Clone, Debug, Deserialize)]
struct EntityRow {
    id: String,
    name: String,
    #[serde(rename = "type")]
    kind: String,
    description: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
struct CorporaData {
    corpora: Connection<CorpusRef>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Extracted {
    extract_knowledge: JobRef,
}

#[component]
pub fn KnowledgePage(session: Session) -> impl IntoView {
    view! {
        <Shell session>
            <KnowledgeView session />
        </Shell>
    }
}

#[component]
fn KnowledgeView(session: Session) -> impl IntoView {
    let query = use_query_map();
    let q = Memo::new(move |_| query.read().get("q").filter(|s| !s.trim().is_empty()));
    let kind = Memo::new(move |_| query.read().get("type").filter(|s| !s.is_empty()));
    let cursors = Cursors::new();
    // A new search starts at the first page.
    cursors.reset_when(move || (q.get(), kind.get()));
    let entities = LocalResource::new(move || {
        let vars =
            json!({ "q": q.get(), "t": kind.get(), "first": PAGE, "after": cursors.after() });
        async move { session.gql::<EntitiesData>(ENTITIES, vars).await }
    });

    let name_input = NodeRef::<Input>::new();
    let type_select = NodeRef::<Select>::new();
    let navigate = use_navigate();
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let name = name_input
            .get_untracked()
            .map(|i| i.value().trim().to_owned())
            .unwrap_or_default();
        let t = type_select
            .get_untracked()
            .map(|s| s.value())
            .unwrap_or_default();
        navigate(
            &format!("/knowledge?q={}&type={}", url_encode(&name), url_encode(&t)),
            NavigateOptions::default(),
        );
    };
    let type_options = TYPES
        .iter()
        .map(|t| view! { <option value=*t selected=move || kind.get().as_deref() == Some(*t)>{*t}</option> })
        .collect_view();

    let listing = move || match entities.get() {
        None => loading_view(),
        Some(Err(e)) => error_view(&e),
        Some(Ok(data)) => {
            let next = data.entities.next_cursor();
            let rows = data.entities.into_nodes();
            if rows.is_empty() && cursors.is_first() {
                return view! {
                    <p id="entities-empty" class="muted">
                        "No entities yet, or none matches. Knowledge comes from extraction: use Extract now."
                    </p>
                }
                .into_any();
            }
            let items = rows
                .into_iter()
                .map(|e| {
                    view! {
                        <li class="entity-row" data-id=e.id.clone()>
                            <a class="entity-link" href=format!("/entities/{}", e.id)>{e.name}</a>
                            <span class="tag type">{e.kind}</span>
                            {e.description.map(|d| view! { <span class="muted description">{d}</span> })}
                        </li>
                    }
                })
                .collect_view();
            view! {
                <ul id="entities-list" class="entities">{items}</ul>
                <PagerNav cursors next prefix="entities" />
            }
            .into_any()
        }
    };
    view! {
        <h2>"Knowledge"</h2>
        <ExtractPanel session on_done=move || entities.refetch() />
        <form id="entity-search" class="search-form" on:submit=on_submit>
            <input id="entity-query" node_ref=name_input type="search" placeholder="Name or description…"
                prop:value=move || q.get().unwrap_or_default() aria-label="Entity name" />
            <select id="entity-type" node_ref=type_select aria-label="Type">
                <option value="">"any type"</option>
                {type_options}
            </select>
            <button type="submit" id="entity-search-button">"Find"</button>
        </form>
        {listing}
    }
}

/// "Extract now" over one corpus or all of the team's, with the run's live bar.
#[component]
fn ExtractPanel(session: Session, on_done: impl Fn() + Copy + 'static) -> impl IntoView {
    let corpora = LocalResource::new(move || async move {
        session.gql::<CorporaData>(CORPORA, Value::Null).await
    });
    let scope = NodeRef::<Select>::new();
    let runs = RwSignal::new(Vec::<(u64, JobWatch)>::new());
    let next = StoredValue::new(0u64);
    let start = move |_| {
        let corpus = scope
            .get_untracked()
            .map(|s| s.value())
            .filter(|v| !v.is_empty());
        let key = next.get_value();
        next.set_value(key + 1);
        let watch = JobWatch::new("kg_extract", "QUEUED", "starting");
        runs.set(vec![(key, watch)]);
        spawn_local(async move {
            match session
                .gql::<Extracted>(EXTRACT, json!({ "c": corpus }))
                .await
            {
                Ok(e) => {
                    let job = e.extract_knowledge;
                    watch.follow(session, job.id, move |_| on_done());
                }
                Err(e) => watch.fail(e.to_string()),
            }
        });
    };
    let options = move || {
        corpora.get().and_then(Result::ok).map(|d| {
            d.corpora
                .edges
                .into_iter()
                .map(|e| e.node)
                .filter(|c| !c.system)
                .map(|c| view! { <option value=c.id>{c.name}</option> })
                .collect_view()
        })
    };
    let running = move || runs.with(|r| r.iter().any(|(_, w)| !w.is_over()));
    view! {
        <section class="card extract" id="extract-panel">
            <div class="extract-controls">
                <label class="inline">"Extract from "
                    <select id="extract-scope" node_ref=scope>
                        <option value="">"all corpora"</option>
                        {options}
                    </select>
                </label>
                <button type="button" id="extract-button" disabled=running on:click=start>"Extract now"</button>
            </div>
            <p class="muted small">"Reads up to 40 documents not yet extracted (or changed since) and records every fact with the sentence that states it."</p>
            <For each=move || runs.get() key=|r| r.0 let:run>
                <JobBar watch=run.1 label="Extraction" id="extract-job" />
            </For>
        </section>
    }
}

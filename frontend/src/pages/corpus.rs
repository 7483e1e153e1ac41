//! A corpus: its documents (title, version, visibility, chunks, status) with delete, move and
//! visibility, and the upload area whose bars follow each file's ingest job live.

use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::hooks::use_params_map;
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_bindgen::JsCast;
use web_sys::{File, FileList, HtmlInputElement, HtmlSelectElement};

use crate::api::{ApiError, Connection, CorpusRef, Page};
use crate::components::{
    count, error_view, loading_view, Cursors, JobBar, JobRef, JobWatch, PagerNav, Shell,
};
use crate::session::Session;

/// Documents per page of the corpus page.
const PAGE: usize = 100;
const CORPUS: &str = "query($id: ID!, $first: Int!, $after: String) { \
corpus(id: $id) { id name description system documentCount chunkCount \
documents(first: $first, after: $after) { pageInfo { hasNextPage endCursor } edges { node { id title filename mimeType visibility currentVersion chunkCount ownerName updatedAt } } } } \
corpora(first: 100) { edges { node { id name system } } } }";
const UPLOAD: &str = "mutation($c: ID!, $f: Upload!, $v: Visibility) { uploadDocument(corpusId: $c, file: $f, visibility: $v) { id kind state stage } }";
const DELETE: &str = "mutation($id: ID!) { deleteDocument(id: $id) }";
const MOVE: &str =
    "mutation($to: ID!, $ids: [ID!]) { moveDocuments(toCorpusId: $to, documentIds: $ids) }";
const VISIBILITY: &str = "mutation($id: ID!, $v: Visibility!) { setVisibility(documentId: $id, visibility: $v) { id visibility } }";

#[derive(Clone, Debug, Deserialize)]
struct CorpusData {
    corpus: Option<CorpusDetail>,
    corpora: Connection<CorpusRef>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CorpusDetail {
    id: String,
    name: String,
    description: Option<String>,
    system: bool,
    document_count: u64,
    chunk_count: u64,
    documents: Page<DocumentRow>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct DocumentRow {
    id: String,
    title: String,
    filename: Option<String>,
    visibility: String,
    current_version: u32,
    chunk_count: u64,
    owner_name: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Uploaded {
    upload_document: JobRef,
}

/// One file dropped or picked, and its job.
#[derive(Clone)]
struct UploadItem {
    key: u64,
    name: String,
    watch: JobWatch,
}

#[component]
pub fn CorpusPage(session: Session) -> impl IntoView {
    view! {
        <Shell session>
            <CorpusView session />
        </Shell>
    }
}

#[component]
fn CorpusView(session: Session) -> impl IntoView {
    let params = use_params_map();
    let corpus_id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let cursors = Cursors::new();
    // Another corpus starts at its first page.
    cursors.reset_when(move || corpus_id.get());
    let data = LocalResource::new(move || {
        let vars = json!({ "id": corpus_id.get(), "first": PAGE, "after": cursors.after() });
        async move { session.gql::<CorpusData>(CORPUS, vars).await }
    });
    let action_error = RwSignal::new(None::<String>);
    let content = move || match data.get() {
        None => loading_view(),
        Some(Err(e)) => error_view(&e),
        Some(Ok(CorpusData { corpus: None, .. })) => error_view(&ApiError::local(
            "This corpus does not exist or is not visible to you.",
        )),
        Some(Ok(CorpusData {
            corpus: Some(corpus),
            corpora,
        })) => {
            let others: Vec<CorpusRef> = corpora
                .edges
                .into_iter()
                .map(|e| e.node)
                .filter(|c| c.id != corpus.id && !c.system)
                .collect();
            let next = corpus.documents.next_cursor();
            let paged = next.is_some() || !cursors.is_first();
            let documents = corpus.documents.into_nodes();
            let refresh = move || data.refetch();
            view! {
                <div class="page-head">
                    <h2 id="corpus-title">{corpus.name}</h2>
                    <span class="counts">
                        {corpus.system.then(|| view! { <span class="tag">"system"</span> })}
                        <span>{count(corpus.document_count, "document")}</span>
                        <span>{count(corpus.chunk_count, "chunk")}</span>
                    </span>
                </div>
                {corpus.description.filter(|d| !d.is_empty()).map(|d| view! { <p class="muted">{d}</p> })}
                {move || action_error.get().map(|e| view! { <p class="error" role="alert" id="action-error">{e}</p> })}
                <DocumentTable session documents others action_error refresh />
                {paged.then(|| view! { <PagerNav cursors next prefix="documents" /> })}
            }
            .into_any()
        }
    };
    view! {
        <p class="crumbs"><a href="/">"Corpora"</a></p>
        {content}
        <UploadArea session corpus_id on_ingested=move || data.refetch() />
    }
}

#[component]
fn DocumentTable(
    session: Session,
    documents: Vec<DocumentRow>,
    others: Vec<CorpusRef>,
    action_error: RwSignal<Option<String>>,
    refresh: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    if documents.is_empty() {
        return view! { <p id="documents-empty" class="muted">"No documents yet: upload some below."</p> }
            .into_any();
    }
    // Runs a mutation; on success reloads the list, on failure says why above it.
    let mutate = move |query: &'static str, vars: Value| {
        action_error.set(None);
        spawn_local(async move {
            match session.gql::<Value>(query, vars).await {
                Ok(_) => refresh(),
                Err(e) => action_error.set(Some(e.to_string())),
            }
        });
    };
    let rows = documents
        .into_iter()
        .map(|d| {
            let href = format!("/documents/{}", d.id);
            let id = d.id.clone();
            let private = d.visibility == "PRIVATE";
            let toggle_to = if private { "TEAM" } else { "PRIVATE" };
            let toggle_label = if private { "Private" } else { "Team" };
            let toggle_title = if private {
                "Only the owner can read it: click to share with the team"
            } else {
                "The whole team can read it: click to make it private"
            };
            let toggle_id = id.clone();
            let toggle = move |_| mutate(VISIBILITY, json!({ "id": toggle_id, "v": toggle_to }));
            let confirming = RwSignal::new(false);
            let delete_id = id.clone();
            let delete = move |_| {
                if confirming.get_untracked() {
                    mutate(DELETE, json!({ "id": delete_id }));
                } else {
                    confirming.set(true);
                }
            };
            let target = NodeRef::<leptos::html::Select>::new();
            let move_id = id.clone();
            let do_move = move |_| {
                let to = target
                    .get_untracked()
                    .map(|s: HtmlSelectElement| s.value())
                    .unwrap_or_default();
                if !to.is_empty() {
                    mutate(MOVE, json!({ "to": to, "ids": [move_id] }));
                }
            };
            let options = others
                .iter()
                .map(|c| view! { <option value=c.id.clone() data-name=c.name.clone()>{c.name.clone()}</option> })
                .collect_view();
            let can_move = !others.is_empty();
            let status = if d.chunk_count > 0 { "searchable" } else { "no text" };
            view! {
                <tr class="document-row" data-id=id.clone() data-title=d.title.clone()>
                    <td data-label="Title">
                        <a class="document-link" href=href>{d.title.clone()}</a>
                        {d.filename.filter(|f| *f != d.title).map(|f| view! { <span class="muted filename">{f}</span> })}
                        {d.owner_name.map(|o| view! { <span class="muted owner">"by " {o}</span> })}
                    </td>
                    <td data-label="Version" class="version">{format!("v{}", d.current_version)}</td>
                    <td data-label="Visibility">
                        <button type="button" class="chip visibility-toggle" title=toggle_title
                            data-visibility=d.visibility.clone() on:click=toggle>{toggle_label}</button>
                    </td>
                    <td data-label="Chunks" class="num">{d.chunk_count}</td>
                    <td data-label="Status" class="status">{status}</td>
                    <td data-label="" class="actions-cell">
                        <div class="actions">
                        {can_move.then(|| view! {
                            <select class="move-target" node_ref=target aria-label="Move to corpus">{options}</select>
                            <button type="button" class="secondary small move-button" on:click=do_move>"Move"</button>
                        })}
                        <button type="button" class="danger small delete-button" on:click=delete
                            on:blur=move |_| confirming.set(false)>
                            {move || if confirming.get() { "Confirm delete" } else { "Delete" }}
                        </button>
                        </div>
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table id="documents-table" class="documents">
            <thead>
                <tr><th>"Title"</th><th>"Version"</th><th>"Visibility"</th><th class="num">"Chunks"</th><th>"Status"</th><th></th></tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

/// Drag-and-drop or picker; every file gets a bar that follows its ingest job to the end.
#[component]
fn UploadArea(
    session: Session,
    corpus_id: Memo<String>,
    on_ingested: impl Fn() + Copy + 'static,
) -> impl IntoView {
    let uploads = RwSignal::new(Vec::<UploadItem>::new());
    let next_key = StoredValue::new(0u64);
    let dragging = RwSignal::new(false);
    let visibility = NodeRef::<leptos::html::Select>::new();

    let start = move |files: Vec<File>| {
        let vis = visibility
            .get_untracked()
            .map(|s: HtmlSelectElement| s.value())
            .unwrap_or_else(|| "TEAM".to_owned());
        for file in files {
            let key = next_key.get_value();
            next_key.set_value(key + 1);
            let watch = JobWatch::new("ingest", "UPLOADING", "uploading");
            uploads.update(|u| {
                u.insert(
                    0,
                    UploadItem {
                        key,
                        name: file.name(),
                        watch,
                    },
                )
            });
            let vars = json!({ "c": corpus_id.get_untracked(), "v": vis });
            spawn_local(async move {
                match session.upload::<Uploaded>(UPLOAD, vars, "f", &file).await {
                    Ok(u) => {
                        let job = u.upload_document;
                        let _ = watch.state.try_set(job.state.clone());
                        let _ = watch
                            .stage
                            .try_set(job.stage.unwrap_or_else(|| job.state.to_lowercase()));
                        let _ = watch.kind.try_set(job.kind);
                        watch.follow(session, job.id, move |_| on_ingested());
                    }
                    Err(e) => watch.fail(e.to_string()),
                }
            });
        }
    };
    let on_change = move |ev: leptos::ev::Event| {
        let Some(input) = ev
            .target()
            .and_then(|t| t.dyn_into::<HtmlInputElement>().ok())
        else {
            return;
        };
        let files = files_of(input.files());
        // Picking the same file again must fire `change` again.
        input.set_value("");
        start(files);
    };
    let on_drop = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        start(files_of(ev.data_transfer().and_then(|d| d.files())));
    };
    let on_dragover = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        dragging.set(true);
    };
    view! {
        <section class="card upload" id="upload">
            <h3>"Upload"</h3>
            <div class=move || if dragging.get() { "dropzone dragging" } else { "dropzone" }
                id="dropzone"
                on:dragover=on_dragover
                on:dragleave=move |_| dragging.set(false)
                on:drop=on_drop>
                <p>"Drop files here, or "
                    <label class="file-button">"choose files"
                        <input id="file-input" type="file" multiple on:change=on_change />
                    </label>
                </p>
                <p class="muted small">"PDF, Word, PowerPoint, spreadsheets, HTML, Markdown and text."</p>
                <label class="inline">"Visible to "
                    <select id="upload-visibility" node_ref=visibility>
                        <option value="TEAM" selected>"the team"</option>
                        <option value="PRIVATE">"only me"</option>
                    </select>
                </label>
            </div>
            <div id="uploads" class="jobs">
                <For each=move || uploads.get() key=|u| u.key let:item>
                    <JobBar watch=item.watch label=item.name />
                </For>
            </div>
        </section>
    }
}

fn files_of(list: Option<FileList>) -> Vec<File> {
    let Some(list) = list else { return Vec::new() };
    (0..list.length()).filter_map(|i| list.get(i)).collect()
}

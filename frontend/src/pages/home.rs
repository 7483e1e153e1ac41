use leptos::html::Input;
use leptos::prelude::*;
use leptos_router::hooks::use_navigate;
use leptos_router::NavigateOptions;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::{Connection, Corpus};
use crate::components::{error_view, loading_view, CorpusList, Shell};
use crate::session::Session;

const CORPORA: &str = "{ corpora(first: 100) { edges { node { id name description system documentCount chunkCount } } } }";
const CREATE: &str =
    "mutation($n: String!, $d: String) { createCorpus(name: $n, description: $d) { id } }";

#[derive(Clone, Debug, Deserialize)]
struct CorporaData {
    corpora: Connection<Corpus>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Created {
    create_corpus: IdOnly,
}

#[derive(Clone, Debug, Deserialize)]
struct IdOnly {
    id: String,
}

/// The signed-in landing page: the corpora you can read, and a form to create one.
#[component]
pub fn HomePage(session: Session) -> impl IntoView {
    view! {
        <Shell session>
            <Corpora session />
        </Shell>
    }
}

#[component]
fn Corpora(session: Session) -> impl IntoView {
    let corpora = LocalResource::new(move || async move {
        session.gql::<CorporaData>(CORPORA, Value::Null).await
    });
    let name = NodeRef::<Input>::new();
    let description = NodeRef::<Input>::new();
    let create = Action::new_local(move |(n, d): &(String, String)| {
        let vars = json!({ "n": n, "d": if d.is_empty() { Value::Null } else { json!(d) } });
        async move { session.gql::<Created>(CREATE, vars).await }
    });
    // A new corpus is where the next step happens: uploading into it.
    let navigate = use_navigate();
    Effect::new(move || {
        if let Some(Ok(created)) = create.value().get() {
            navigate(
                &format!("/corpora/{}", created.create_corpus.id),
                NavigateOptions::default(),
            );
        }
    });
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let read = |r: NodeRef<Input>| {
            r.get_untracked()
                .map(|i| i.value().trim().to_owned())
                .unwrap_or_default()
        };
        let n = read(name);
        if !n.is_empty() {
            create.dispatch((n, read(description)));
        }
    };
    let list = move || match corpora.get() {
        None => loading_view(),
        Some(Err(e)) => error_view(&e),
        Some(Ok(data)) => {
            let corpora: Vec<Corpus> = data.corpora.edges.into_iter().map(|e| e.node).collect();
            view! { <CorpusList corpora /> }.into_any()
        }
    };
    let create_error = move || match create.value().get() {
        Some(Err(e)) => Some(
            view! { <p id="create-corpus-error" class="error" role="alert">{e.to_string()}</p> },
        ),
        _ => None,
    };
    view! {
        <h2>"Corpora"</h2>
        {list}
        <form id="create-corpus-form" class="card inline-form" on:submit=on_submit>
            <h3>"New corpus"</h3>
            <div class="fields">
                <label>"Name" <input id="new-corpus-name" node_ref=name required maxlength="200" /></label>
                <label>"Description" <input id="new-corpus-description" node_ref=description maxlength="1000" /></label>
                <button id="create-corpus" type="submit" disabled=move || create.pending().get()>"Create"</button>
            </div>
            {create_error}
        </form>
    }
}

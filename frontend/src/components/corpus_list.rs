use leptos::prelude::*;

use crate::api::Corpus;

/// The corpora the principal can see, with their sizes.
#[component]
pub fn CorpusList(corpora: Vec<Corpus>) -> impl IntoView {
    let empty = corpora.is_empty().then(|| {
        view! { <li class="empty muted">"No corpora yet."</li> }
    });
    let rows = corpora
        .into_iter()
        .map(|c| {
            view! {
                <li class="corpus" data-id=c.id>
                    <div class="corpus-main">
                        <span class="corpus-name">{c.name}</span>
                        {c.description.filter(|d| !d.is_empty()).map(|d| view! { <span class="muted">{d}</span> })}
                    </div>
                    <span class="counts">
                        <span class="documents">{count(c.document_count, "document")}</span>
                        <span class="chunks">{count(c.chunk_count, "chunk")}</span>
                    </span>
                </li>
            }
        })
        .collect_view();
    view! { <ul id="corpora-list" class="corpora">{rows} {empty}</ul> }
}

fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

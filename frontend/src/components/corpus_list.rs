use leptos::prelude::*;

use crate::api::Corpus;
use crate::components::count;

/// The corpora the principal can see, with their sizes; each links to its page.
#[component]
pub fn CorpusList(corpora: Vec<Corpus>) -> impl IntoView {
    let empty = corpora.is_empty().then(|| {
        view! { <li class="empty muted">"No corpora yet."</li> }
    });
    let rows = corpora
        .into_iter()
        .map(|c| {
            let href = format!("/corpora/{}", c.id);
            view! {
                <li class="corpus" data-id=c.id>
                    <div class="corpus-main">
                        <a class="corpus-name" href=href>{c.name}</a>
                        {c.description.filter(|d| !d.is_empty()).map(|d| view! { <span class="muted">{d}</span> })}
                    </div>
                    <span class="counts">
                        {c.system.then(|| view! { <span class="tag">"system"</span> })}
                        <span class="documents">{count(c.document_count, "document")}</span>
                        <span class="chunks">{count(c.chunk_count, "chunk")}</span>
                    </span>
                </li>
            }
        })
        .collect_view();
    view! { <ul id="corpora-list" class="corpora">{rows} {empty}</ul> }
}

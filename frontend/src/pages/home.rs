use leptos::prelude::*;
use leptos_router::components::Redirect;

use crate::api::{self, ApiError, Overview};
use crate::components::{CorpusList, LogoutButton, TopBar};
use crate::session::Session;

/// The signed-in landing page: who you are and the corpora you can read.
#[component]
pub fn HomePage(session: Session) -> impl IntoView {
    let overview = LocalResource::new(move || {
        let token = session.token();
        async move {
            match token {
                Some(token) => api::overview(&token).await.map(Some),
                None => Ok(None),
            }
        }
    });
    // A token revoked since it was stored: forget it, which leads back to the login page.
    Effect::new(move || {
        if let Some(Err(e)) = overview.get() {
            if e.is_unauthenticated() {
                session.sign_out();
            }
        }
    });
    let content = move || {
        Suspend::new(async move {
            match overview.await {
                Ok(Some(data)) => signed_in(session, data).into_any(),
                Ok(None) => ().into_any(),
                Err(e) => failed(session, e).into_any(),
            }
        })
    };
    view! {
        <Show when=move || session.is_signed_in() fallback=|| view! { <Redirect path="/login" /> }>
            <Transition fallback=|| view! { <p class="page muted">"Loading…"</p> }>{content}</Transition>
        </Show>
    }
}

fn signed_in(session: Session, data: Overview) -> impl IntoView {
    let corpora = data.corpora.edges.into_iter().map(|e| e.node).collect();
    view! {
        <TopBar session me=data.me />
        <main class="page">
            <h2>"Corpora"</h2>
            <CorpusList corpora />
        </main>
    }
}

fn failed(session: Session, error: ApiError) -> impl IntoView {
    view! {
        <main class="page narrow">
            <p class="error" role="alert">{error.to_string()}</p>
            <LogoutButton session />
        </main>
    }
}

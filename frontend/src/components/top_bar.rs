use leptos::prelude::*;
use leptos_router::hooks::use_location;
use serde_json::Value;

use crate::api::Principal;
use crate::session::Session;

const ME: &str = "{ me { user { id name role } team { id name } capabilities } }";

#[derive(Clone, Debug, serde::Deserialize)]
struct MeData {
    me: Principal,
}

/// The bar above every signed-in page: navigation, who you are, and the way out.
#[component]
pub fn TopBar(session: Session) -> impl IntoView {
    let me = LocalResource::new(move || {
        let _ = session.token();
        async move { session.gql::<MeData>(ME, Value::Null).await }
    });
    let location = use_location();
    let nav = move |href: &'static str, label: &'static str, id: &'static str| {
        let current = move || {
            let path = location.pathname.get();
            let active = match href {
                "/" => {
                    path == "/" || path.starts_with("/corpora") || path.starts_with("/documents")
                }
                "/knowledge" => path.starts_with("/knowledge") || path.starts_with("/entities"),
                other => path.starts_with(other),
            };
            active.then_some("page")
        };
        view! { <a href=href id=id aria-current=current>{label}</a> }
    };
    let who = move || {
        me.get().and_then(Result::ok).map(|m| {
            let role = m.me.user.role.to_lowercase();
            let capabilities = format!("Capabilities: {}", m.me.capabilities.join(", "));
            view! {
                <span id="whoami" title=capabilities>
                    <strong class="user">{m.me.user.name}</strong>
                    <span class="role">{role}</span>
                    <span class="team">"team " {m.me.team.name}</span>
                </span>
            }
        })
    };
    view! {
        <header class="top-bar">
            <a class="brand" href="/">"Cairn"</a>
            <nav class="main-nav" aria-label="Main">
                {nav("/", "Corpora", "nav-corpora")}
                {nav("/search", "Search", "nav-search")}
                {nav("/knowledge", "Knowledge", "nav-knowledge")}
            </nav>
            <div class="who">
                {who}
                <LogoutButton session />
            </div>
        </header>
    }
}

/// Forgets the token; the page then falls back to the login form.
#[component]
pub fn LogoutButton(session: Session) -> impl IntoView {
    view! {
        <button id="logout-button" type="button" class="secondary" on:click=move |_| session.sign_out()>
            "Log out"
        </button>
    }
}
